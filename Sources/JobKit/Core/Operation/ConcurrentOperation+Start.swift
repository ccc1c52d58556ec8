import Foundation

extension ConcurrentOperation {
  /// `isReady`, without Foundation's lock when the class keeps Foundation's, which answers from
  /// dependencies alone (`inheritsFoundationsAnswers`), and none was ever added: for a job that starts the
  /// operation itself, in no queue (`JobController.enqueue`).
  var isReadyToStart: Bool {
    if inheritsFoundationsAnswers, !state.withLock({ $0.hadDependency }) { return true }
    return isReady
  }

  /// Before a start skips the work of a cancelled operation: sets Foundation's `isCancelled` if a
  /// `cancel()` recorded the cancel in the state (its first step) but has not called Foundation's
  /// own `cancel()` yet, which does nothing once the operation finished, so the flag would stay
  /// `false` on a task that was cancelled and skipped.
  func setFoundationsCancelFlag() {
    if !super.isCancelled {
      super.cancel()
    }
  }
}

extension ConcurrentOperation {
  /// Claims the right to add this operation to a queue; only the first claim (this one, or a
  /// job's `trackAndQueue`) gets it, so JobKit never adds an operation to two queues, which is a
  /// fatal error in Foundation. Returns `false` if it was claimed before or the operation started.
  /// JobKit cannot see an `addOperation` made by other code.
  func claimQueue() -> Bool {
    state.withLock { $0.claimQueue() }
  }
}
