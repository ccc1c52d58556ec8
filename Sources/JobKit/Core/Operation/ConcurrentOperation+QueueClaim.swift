import Foundation

extension ConcurrentOperation {
  /// Claims the right to add this operation to a queue; only the first claim (this one, or a
  /// job's `trackAndQueue`) gets it, so JobKit never adds an operation to two queues, which is a
  /// fatal error in Foundation. Returns `false` if it was claimed before or the operation started.
  /// JobKit cannot see an `addOperation` made by other code.
  func claimQueue() -> Bool {
    state.withLock { $0.claimQueue() }
  }
}
