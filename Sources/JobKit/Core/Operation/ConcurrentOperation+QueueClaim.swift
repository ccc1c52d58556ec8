import Foundation

extension OperationState {
  /// Claims the right to add the operation to a queue for a caller that does not track it (a
  /// job's `startJob`/`run()`, or `run()`/`runAndWait()` on a task). Returns `false` when a job
  /// or an earlier call already claimed it, or the operation already started.
  mutating func claimQueue() -> Bool {
    guard phase.isIdle, !queueClaimed else { return false }
    queueClaimed = true
    return true
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
