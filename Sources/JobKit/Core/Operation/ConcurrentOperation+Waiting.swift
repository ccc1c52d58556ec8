import Foundation

extension ConcurrentOperation {
  /// Suspends until the operation finished, then throws its ``error``, or, if it was cancelled
  /// and finished without an error, its ``cancellationReason`` (`CancellationError` for a plain
  /// `cancel()`). Does not start the operation.
  ///
  /// If the awaiting Swift task is cancelled first, this stops waiting at once and throws
  /// `CancellationError`; the operation itself is not cancelled (use `JobController.run()` to
  /// tie the two together).
  public func waitForFinish() async throws {
    let waiter = FinishWaiter()
    let finished = await withTaskCancellationHandler {
      await waiter.wait(on: self)
    } onCancel: {
      waiter.resume(finished: false)
    }
    removeFinishObserver(waiter)
    guard finished else { throw CancellationError() }
    try throwOutcome()
  }

  /// Suspends until the operation finished. Cancelling the awaiting Swift task cancels the
  /// operation (and keeps waiting for it to actually finish): with the reason of the operation
  /// whose Swift task awaits (``enclosingOperation``: a pipeline whose step runs it, an async
  /// block task or work whose body does), if there is one, so a job run there sees why that
  /// operation stopped.
  func waitForFinishCancellingOnTaskCancel() async throws {
    let waiter = FinishWaiter()
    // Read here: the cancellation handler runs on the cancelling thread, outside this task.
    let enclosing = Self.enclosingOperation
    _ = await withTaskCancellationHandler {
      await waiter.wait(on: self)
    } onCancel: {
      if let reason = enclosing?.cancellationReason {
        self.cancel(reason: reason)
      } else {
        self.cancel()
      }
    }
    try throwOutcome()
  }

  /// The operation whose work this Swift task runs (a pipeline's steps, an async block task's
  /// or work's body), if any: an operation cancels its Swift task only after it recorded its
  /// ``cancellationReason``, so an operation awaited in that task reads the reason when the
  /// task's cancel reaches it.
  @TaskLocal static var enclosingOperation: ConcurrentOperation?

  /// Throws the operation's error, or for a cancelled operation without one its
  /// ``cancellationReason`` (`CancellationError` if none was recorded).
  /// A `CancellationError` the operation finished with after a cancel with a reason (a step
  /// that saw its Swift task cancelled) is replaced by that reason.
  func throwOutcome() throws {
    if let error {
      if error is CancellationError, let reason = cancellationReason { throw reason }
      throw error
    }
    if isCancelled { throw cancellationReason ?? CancellationError() }
  }
}

/// One suspended `await` on an operation's finish: resumed exactly once, either by the finish or
/// by the awaiting task's cancellation, whichever comes first.
final class FinishWaiter: OperationFinishObserver, @unchecked Sendable {
  // @unchecked Sendable: `state` is a lock-protected box; the rest is immutable.
  private enum State {
    case idle
    case waiting(CheckedContinuation<Bool, Never>)
    case resumed(finished: Bool)
  }

  private let state = LockedBox(State.idle)

  func wait(on operation: ConcurrentOperation) async -> Bool {
    await withCheckedContinuation { continuation in
      let early: Bool? = state.withLock { state in
        switch state {
        case .idle:
          state = .waiting(continuation)
          return nil
        case .resumed(let finished):
          return finished
        case .waiting:
          preconditionFailure("FinishWaiter awaited twice")
        }
      }
      if let early {
        continuation.resume(returning: early)
      } else if !operation.addFinishObserver(self) {
        resume(finished: true)
      }
    }
  }

  func resume(finished: Bool) {
    let continuation: CheckedContinuation<Bool, Never>? = state.withLock { state in
      switch state {
      case .idle:
        state = .resumed(finished: finished)
        return nil
      case .waiting(let continuation):
        state = .resumed(finished: finished)
        return continuation
      case .resumed:
        return nil
      }
    }
    continuation?.resume(returning: finished)
  }

  func operationDidFinish(_ operation: ConcurrentOperation) {
    resume(finished: true)
  }
}

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
