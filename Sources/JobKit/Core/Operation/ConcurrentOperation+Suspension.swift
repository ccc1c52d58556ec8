/// Suspending and resuming (CompositeOperations' `suspend`, `resume`, `isSuspended`). The state
/// lives in the operation's own ``OperationState`` (see `OperationState+Suspension.swift`);
/// subclasses react through `suspensionChanged(to:generation:)`.
extension ConcurrentOperation {
  /// Whether the operation is suspended: ``ConcurrentOperation/suspend()`` was called and neither
  /// ``ConcurrentOperation/resume()`` nor `cancel()` since. Safe to read from any thread.
  public var isSuspended: Bool { state.withLock { $0.suspension.isSuspended } }

  /// What `suspend()` does: records the flag, then tells the subclass hook, after the lock.
  func applySuspend() {
    guard let change = state.withLock({ $0.suspend() }) else { return }
    suspensionChanged(to: change.isSuspended, generation: change.generation)
  }

  /// What `resume()` does: clears the flag and tells the subclass hook, then runs a start that
  /// waited for the resume. Also used by a job that stops while suspended, so a start that
  /// waited does not wait for a resume that may never come.
  func applyResume() {
    guard case .resumed(let change, let runsStart, let observer) = state.withLock({ $0.resume() }) else { return }
    suspensionChanged(to: change.isSuspended, generation: change.generation)
    if runsStart {
      runStart(telling: observer)
    }
  }
}
