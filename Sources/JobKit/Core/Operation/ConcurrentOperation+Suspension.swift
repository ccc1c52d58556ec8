/// Suspending and resuming (CompositeOperations' `suspend`, `resume`, `isSuspended`). The state
/// lives in the operation's own ``OperationState`` (see `OperationState+Suspension.swift`);
/// subclasses react through `suspensionChanged(to:generation:)`.
extension ConcurrentOperation {
  /// Whether the operation is suspended: ``ConcurrentOperation/suspend()`` was called and neither
  /// ``ConcurrentOperation/resume()`` nor `cancel()` since, and the operation has not finished.
  /// Safe to read from any thread.
  public var isSuspended: Bool { state.withLock { $0.suspension.isSuspended } }

  /// What `suspend()` does: records the flag, then tells the subclass hook, after the lock.
  func applySuspend() {
    guard let change = state.withLock({ $0.suspend() }) else { return }
    suspensionChanged(to: change.isSuspended, generation: change.generation)
  }

  /// What `resume()` does: clears the flag and tells the subclass hook, then runs a start that
  /// waited for the resume. With `forStop`, for a job that stops without a cancel (`fail(_:)`):
  /// the suspension also ends for good (a later `suspend()` is a no-op), so a start that waited
  /// does not wait for a resume that may never come.
  func applyResume(forStop: Bool = false) {
    let action = state.withLock { forStop ? $0.endSuspensionForStop() : $0.resume() }
    guard case .resumed(let change, let runsStart, let observers, let waiters) = action else {
      return
    }
    suspensionChanged(to: change.isSuspended, generation: change.generation)
    for waiter in waiters {
      waiter.resume()
    }
    if runsStart {
      runStart(telling: observers)
    }
  }

  /// Whether a cancel was recorded, and whether the operation is suspended, read under one lock.
  var cancelAndSuspension: (cancelled: Bool, suspended: Bool) {
    state.withLock { ($0.isCancelRecorded, $0.suspension.isSuspended) }
  }

  /// Suspends the calling Swift task while the operation is suspended: returns at once if it is
  /// not, else at the resume, or when the Swift task is cancelled. For subclasses whose work is
  /// async and pauses between steps (a pipeline); a `cancel()` alone does not wake the waiter,
  /// so such a subclass cancels its Swift task in `operationCancelled()`.
  func waitWhileSuspended() async {
    let id = state.withLock { $0.nextWaiterID() }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        if !state.withLock({ $0.addWaiter(id, continuation) }) {
          continuation.resume()
        }
      }
    } onCancel: {
      state.withLock { $0.cancelWaiter(id) }?.resume()
    }
  }
}
