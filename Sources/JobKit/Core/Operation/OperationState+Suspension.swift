/// Whether an operation is suspended (``ConcurrentOperation/suspend()``), as a ``StampedFlag``
/// whose owner the operation is: whoever applies its changes elsewhere (a job holding back its
/// tasks) drops a stale one that arrives late.
struct OperationSuspension {
  /// Cleared quietly by a cancel or a finish (`OperationState.swift`).
  var flag = StampedFlag()
  var isSuspended: Bool { flag.isSet }
  /// Swift tasks waiting for the resume (`ConcurrentOperation.waitWhileSuspended()`).
  fileprivate(set) var waiters = Waiters<Void, Void>()
  /// A stop without a cancel (a job's `fail(_:)`) ended the suspension for good: like a cancel,
  /// it makes a later `suspend()` a no-op.
  fileprivate(set) var isRefused = false
}

/// Suspension: a suspended operation that its queue starts waits (`Phase.deferred`, executing)
/// until `resume()` runs `operationStart()`, or a cancel finishes it.
extension OperationState {
  /// A change of the suspension that the caller reports to the operation's
  /// `suspensionChanged(to:generation:)` hook, after the lock.
  struct SuspensionChange: Equatable {
    var isSuspended: Bool
    var generation: UInt64
  }

  /// `suspend()`. Returns the change, or `nil` when nothing changed: already suspended, finished,
  /// cancelled or stopped (a cancelled or stopped operation cannot be suspended).
  mutating func suspend() -> SuspensionChange? {
    guard !suspension.isSuspended, !suspension.isRefused, phase != .finished, !isCancelRecorded else { return nil }
    return SuspensionChange(isSuspended: true, generation: suspension.flag.change(to: true))
  }

  enum ResumeAction {
    /// Not suspended: nothing changed.
    case none
    /// Report `change`, resume `waiters`; if `runsStart`, the queue had started the operation
    /// meanwhile: tell the start `observers` and run `operationStart()` now, on the resuming thread.
    case resumed(
      SuspensionChange, runsStart: Bool, observers: [any OperationStartObserver],
      waiters: [CheckedContinuation<Void, Never>])
  }

  /// `resume()`. A no-op unless suspended.
  mutating func resume() -> ResumeAction {
    guard suspension.isSuspended else { return .none }
    let change = SuspensionChange(isSuspended: false, generation: suspension.flag.change(to: false))
    let waiters = suspension.waiters.releaseAll()
    guard phase == .deferred else { return .resumed(change, runsStart: false, observers: [], waiters: waiters) }
    phase = .starting(cancelPending: false)
    let observers = exchange(&startObservers, with: [])
    return .resumed(change, runsStart: true, observers: observers, waiters: waiters)
  }

  /// The operation's owner stopped it without a cancel (a job's `fail(_:)`): as `cancel()` does,
  /// this ends a suspension and makes every later `suspend()` a no-op, in one transition, so a
  /// suspend racing the stop either comes first (and this resumes it) or changes nothing. A
  /// start that waited runs (the stopped job then finishes without `main()`): `resume()`'s action.
  mutating func endSuspensionForStop() -> ResumeAction {
    suspension.isRefused = true
    return resume()
  }

  /// A new waiter for the resume, before its continuation exists (see ``Waiters``).
  mutating func nextWaiterID() -> UInt64 {
    suspension.waiters.makeWaiter()
  }

  /// Registers a Swift task waiting for the resume. Returns `false` (registering nothing) when
  /// the operation is not suspended or the waiter was cancelled first: the caller resumes it.
  mutating func addWaiter(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
    guard suspension.isSuspended else {
      suspension.waiters.remove(id)
      return false
    }
    return suspension.waiters.register(id, waitingFor: (), continuation)
  }

  /// The waiter's Swift task was cancelled. Returns its continuation, to resume, if registered.
  mutating func cancelWaiter(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
    suspension.waiters.cancel(id)
  }
}
