import Foundation

extension ConcurrentOperation {
  /// Whether something JobKit can see will learn how the operation ended: a job tracking it, or
  /// a ``waitForFinish()`` (or `run()`) suspended on it now. Reads only the operation's own
  /// bookkeeping, under its lock. For the floors above, to decide whether a failure went unseen.
  var isObservedToFinish: Bool {
    state.withLock { state in
      if case .none = state.observers { return false }
      return true
    }
  }
}
