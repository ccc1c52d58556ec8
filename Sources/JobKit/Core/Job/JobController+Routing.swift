import Foundation

/// The doors to the job's state, and routing and draining: what transitions leave in the job's
/// ``Outbox`` (finished tasks to route, events, progress) is performed after the lock by one
/// thread at a time, the drainer: a finished task's callbacks, then its group's, then
/// `allTasksFinished()`, serially (see the type's documentation).
///
/// Every transition of the job's state goes through ``withJobState(_:)`` (or its variants
/// ``withJobState(_:on:_:)`` and ``withJobState(firstBatchOn:_:)``), every read through
/// ``readJobState(_:)``; only they and the drainer's own locks below take the job's lock
/// (`.ci/check-transitions` checks it).
extension JobController {
  /// The door to the job's state: applies `transition` under the job's lock and takes, with the
  /// same lock, what the state left to do after it (``JobState/AfterLock``); then, with no lock
  /// held, performs the after-lock effects and drains if this thread must. So whether a change
  /// is followed by a drain depends on the state (work in the outbox, nobody draining), never
  /// on the caller. Called on the drainer's own thread (from a callback, or a batch's work), it
  /// drains nested, events and progress only (``Outbox/Role/nested``), never a second loop.
  @inline(__always)  // Measured: out of line, grp-seq +1.5%, cmd +1.2% (Benchmarks/README.md).
  func withJobState<Result>(_ transition: (inout JobState) -> Result) -> Result {
    let thread = currentThreadID()
    let (result, role) = withJobState(.now, on: thread, transition)
    if role != .none {
      drain(role, on: thread)
    }
    return result
  }

  /// The door, for a caller with actions of its own to perform between the lock and the drain
  /// (`track` queues the task, a stop cancels its tasks): performs the after-lock effects and
  /// returns the claim (``JobState/DrainClaim``), with which the caller then drains
  /// (``drain(_:on:inTrack:first:)``). After ``JobState/DrainClaim/afterActions`` the role is
  /// `.none`: the actions claim once carried out.
  @inline(__always)  // Measured: out of line, grp-seq +1.5%, cmd +1.2% (Benchmarks/README.md).
  func withJobState<Result>(
    _ claim: JobState.DrainClaim, on thread: UInt, _ transition: (inout JobState) -> Result
  ) -> (result: Result, role: Outbox<TaskNode, PendingJobEvent>.Role) {
    let (result, after) = jobState.withLock { state in
      (transition(&state), state.afterTransition(claim, on: thread))
    }
    performAfterLockEffects(after.effects)
    return (result, after.role)
  }

  /// The door for a finish: as ``withJobState(_:on:_:)`` with ``JobState/DrainClaim/now``, and
  /// if this thread becomes the drainer, its first batch is taken with the same lock (`nil`:
  /// there was none, and the drainer was released). The caller drains with it after its actions.
  @inline(__always)  // Measured: out of line, grp-seq +1.5%, cmd +1.2% (Benchmarks/README.md).
  func withJobState<Result>(
    firstBatchOn thread: UInt, _ transition: (inout JobState) -> Result
  ) -> (result: Result, role: Outbox<TaskNode, PendingJobEvent>.Role, first: JobState.Drain?) {
    let (result, after, first) = jobState.withLock { state in
      let result = transition(&state)
      let after = state.afterTransition(.now, on: thread)
      return (result, after, after.role == .drainer ? state.nextDrain(on: thread) : nil)
    }
    performAfterLockEffects(after.effects)
    return (result, after.role, first)
  }

  /// The read-only door: `read` sees the job's state under its lock, borrowed, so it can call no
  /// transition. Nothing is performed or drained after it.
  func readJobState<Result>(_ read: (borrowing JobState) -> Result) -> Result {
    jobState.withLock { state in read(state) }
  }

  /// The operation's door (`withStateLocked`): the job's `ConcurrentOperation` state is part
  /// of its `JobState`, under its one lock. Nothing is performed or drained after it.
  func withOperationState<Result>(_ transition: (inout OperationState) -> Result) -> Result {
    jobState.withLock { $0.withOperation(transition) }
  }

  /// The door for the job's `deinit`: its unrouted nodes let go of their tasks (returned with
  /// their nodes, to be detached and released after the lock).
  func abandonJobState() -> [(node: TaskNode, task: Operation)] {
    jobState.withLock { $0.abandon() }
  }

  /// Carries out what admissions left to do after the lock: schedules refill timers (one per
  /// group at a time) and resumes the producers waiting for room.
  func performAfterLockEffects(_ effects: AfterLockEffects?) {
    guard let effects else { return }
    performNonEmptyAfterLockEffects(effects)
  }

  private func performNonEmptyAfterLockEffects(_ effects: AfterLockEffects) {
    for effect in effects.effects {
      switch effect {
      case .refill(let group):
        scheduleRefill(of: group)
      case .wake(let waiter, let room):
        waiter.resume(returning: room)
      }
    }
  }

  /// Drains as `role` says (see ``Outbox/Role``); `inTrack` for a `track` call of `main()`.
  /// `first`: the drainer's first batch, if it was taken with the lock that made it the drainer.
  func drain(
    _ role: Outbox<TaskNode, PendingJobEvent>.Role, on thread: UInt, inTrack: Bool = false,
    first: JobState.Drain? = nil
  ) {
    switch role {
    case .none:
      return
    case .nested:
      _ = perform(jobState.withLock { $0.nestedDrain() })
    case .drainer:
      var next = first ?? jobState.withLock { $0.nextDrain(on: thread, inTrack: inTrack) }
      while let batch = next {
        guard case .drained(let routed) = perform(batch) else { return }
        // One lock per routed task: the routed one is forgotten as the next batch is taken. Its
        // task is held here until after that lock: the job may hold its last reference, whose
        // release (and `deinit`, the user's code) must not happen under the lock.
        let task = routed?.task
        next = jobState.withLock { $0.nextDrain(on: thread, inTrack: inTrack, routed: routed) }
        withExtendedLifetime(task) {}
      }
    }
  }

  private enum Performed {
    /// `routed`: the task whose per-task callback was called (or skipped), to be forgotten.
    case drained(routed: TaskNode?)
    /// The job finished: the drainer was released with that batch.
    case finished
  }

  /// Asks to drain once actions carried out after their transition's lock call for it (a stop's,
  /// claimed ``JobState/DrainClaim/afterActions``; a task tracked after it finished, routed by
  /// the same `track` call): the door, with a transition that changes nothing.
  func drainIfIdle(inTrack: Bool = false) {
    let thread = currentThreadID()
    let (_, role) = withJobState(inTrack ? .inTrack : .now, on: thread) { _ in }
    drain(role, on: thread, inTrack: inTrack)
  }

  /// Performs one batch: events, progress, then its work.
  private func perform(_ batch: JobState.Drain) -> Performed {
    if !batch.exits.isEmpty {
      performExits(batch.exits)
    }
    if let delivery = batch.events {
      deliver(delivery)
    }
    performAfterLockEffects(batch.deliveries?.effects)
    if let (progress, total, completed) = batch.progress {
      // No lock is held while `Progress` changes (on Apple platforms its KVO observers run now).
      progress.totalUnitCount = total
      progress.completedUnitCount = completed
    }
    switch batch.item {
    case .none, .step(.none):
      return .drained(routed: nil)
    case .route(let node, let decision):
      return .drained(routed: routeOne(node, decision) ? node : nil)
    case .step(.group(let outcome)):
      runGroupCallback(outcome)
      return .drained(routed: nil)
    case .step(.allTasksFinished):
      allTasksFinished()
      guard let last = jobState.withLock({ $0.drainAfterAllTasksFinished() }) else { return .drained(routed: nil) }
      return perform(last)
    case .step(.finish(let finish)):
      finish.graceTimer?.cancel()
      finish.timeLimitTimer?.cancel()
      for group in finish.unusedLimits {
        reportMisuse(
          .limitNeverUsed,
          "setMaxConcurrentTasks(_:forGroup: \(group).self) set a limit, but the job tracked no task of exactly that type"
        )
      }
      jobWillFinish(cancelled: finish.cancelled)
      operationDone(error: finish.error)
      return .finished
    }
  }

  /// Stamps and yields a batch of events, ending the streams after the job's last event.
  private func deliver(_ delivery: JobEventListeners.Delivery) {
    let now = ContinuousClock.now
    for pending in delivery.events {
      let event = pending.stamped(now)
      for listener in delivery.listeners {
        listener.yield(event)
      }
    }
    if delivery.close {
      for listener in delivery.listeners {
        listener.finish()
      }
    }
  }

  /// A tracked task finished: retry it if its policy says so, else queue it for routing (and
  /// route now if nobody drains), and start the next task waiting for its slot.
  /// `error`: the error a ``ConcurrentOperation`` finished with, when its observer was told it
  /// (`nil`: read it from the task).
  func taskDidFinish(_ node: TaskNode, error: (any Error)?? = nil) {
    if let retry = node.retry, scheduleRetry(of: node, retry) {
      return
    }
    // `timing` never changes once the node is published: read it without the lock.
    let now = node.timing != nil ? ContinuousClock.now : nil
    let report = finishReport(of: node, error: error)
    let thread = currentThreadID()
    // One lock from the finish to the task's own callback: the finish is booked and, if this
    // thread becomes the drainer, its first batch taken (usually this task, decided already).
    let (actions, role, first) = withJobState(firstBatchOn: thread) {
      $0.recordFinish(node, at: now, report: report)
    }
    if let actions {
      if let timeout = actions.timeout {
        timeout.cancel()
      }
      if !actions.exits.isEmpty {
        performExits(actions.exits)
      }
    }
    if role == .drainer, first == nil { return }  // nothing left: the drainer was released
    drain(role, on: thread, first: first)
  }

  /// What routing needs to know of `node`'s finished task, read now with no lock held.
  private func finishReport(of node: TaskNode, error known: (any Error)??) -> FinishReport {
    // The task is finishing on this thread: `operation` is alive.
    var error: (any Error)?
    if let known {
      error = known
    } else if let operation = node.operation as? ConcurrentOperation {
      error = operation.error
    }
    let observed = node.timing != nil
    let name = observed ? node.operation.name : nil
    let reason = observed ? eventReason(of: node.operation) : nil
    guard error != nil || name != nil || reason != nil else { return .nothing }
    return FinishReport(
      error: error, isCancelled: error != nil ? node.operation.isCancelled : nil, name: name, reason: reason)
  }

  /// The reason a stopped task's `taskFinished` event carries: its `cancellationReason`, unless
  /// it is a plain `cancel()`'s `CancellationError` (which events leave out, as before reasons).
  private func eventReason(of task: Operation) -> (any Error)? {
    guard let reason = (task as? ConcurrentOperation)?.cancellationReason, !(reason is CancellationError) else {
      return nil
    }
    return reason
  }

  func stop(_ reason: JobState.Stop) {
    perform(withJobState(.afterActions, on: currentThreadID()) { $0.stop(reason) }.result)
  }

  /// Why the job stops, to hand down to a task tracked while it stops, as `performNow` hands
  /// it down to what it cancels (``JobState/stopReason``).
  func stopReason() -> any Error {
    readJobState { $0.stopReason }
  }

  /// Carries out a stop that was recorded: now, or, when this thread is carrying out another
  /// stop (a parent job cancelling this one), right after it, so stops of nested jobs never pile
  /// up on the stack (see `Trampoline`).
  func perform(_ actions: JobState.StopActions) {
    Trampoline.perform(actions, of: self)
  }

  /// Carries out a stop: cancels timers, arms the grace period, cancels tasks, queues the tasks
  /// a suspension held back, starts those that waited for admission, drains.
  func performNow(_ actions: JobState.StopActions) {
    _ = actions.replacedReason  // released here, after the lock
    for timer in actions.timers {
      timer.cancel()
    }
    // Before anything here can let the job finish, which cancels the grace period's timer.
    if actions.armsGrace {
      armCancellationGrace()
    }
    // The reason was recorded with the stop: what is cancelled sees it.
    if let reason = actions.reason {
      for task in actions.cancel {
        task.cancel(handingDown: reason)
      }
    }
    // The tasks the stop let go, after their cancel: they finish at once.
    if !actions.exits.isEmpty {
      performExits(actions.exits)
    }
    drainIfIdle()
  }

  /// A tracked `ConcurrentOperation` started while events were listened to.
  func taskDidStart(_ node: TaskNode) {
    let name = node.operation.name
    let now = ContinuousClock.now
    withJobState { $0.taskStarted(node, name: name, at: now) }
  }

  /// Calls (or skips) `node`'s per-task callback; `decided`: the decision taken with the
  /// node, if any. Returns whether the caller must forget the node (its next `nextDrain` does,
  /// and runs its group's callback if due).
  private func routeOne(_ node: TaskNode, _ decided: JobState.RoutingDecision?) -> Bool {
    // The task finished, so nobody but this router touches `node.task` any more.
    guard let task = node.task else { return false }
    let decision = decided ?? decide(node, task)
    switch decision {
    case .call:
      if !node.callCompletion(task) {
        taskFinished(task)
      }
    case .skip:
      break
    case .failFast(let actions):
      perform(actions)
    }
    return true
  }

  /// The decision for a task whose finishing thread did not report it (see ``FinishReport``).
  private func decide(_ node: TaskNode, _ task: Operation) -> JobState.RoutingDecision {
    let failure = failure(of: task, node: node)
    // Only a failure asks whether the task was cancelled (corelibs' `isCancelled` takes a lock).
    let isCancelled = failure != nil && task.isCancelled
    let name = node.timing != nil ? task.name : nil
    let reason = node.timing != nil ? eventReason(of: task) : nil
    return withJobState {
      $0.beginRouting(node, failure: failure, isCancelled: isCancelled, name: name, reason: reason)
    }
  }

  /// The failure a finished task stands for, if any: a timeout, or a `ConcurrentOperation` error.
  private func failure(of task: Operation, node: TaskNode) -> TaskFailure? {
    // Under the lock (a rare path: a timed-out task, or a retry a stop ended): a retry's timer
    // thread may still be asking the node's state.
    if readJobState({ $0.timedOut(node) }) {
      return TaskFailure(task: task, error: JobKitError.timedOut(task))
    }
    guard let operation = task as? ConcurrentOperation, let error = operation.error else { return nil }
    return TaskFailure(task: task, error: error)
  }

  private func runGroupCallback(_ outcome: JobState.GroupOutcome) {
    switch outcome {
    case .none:
      break
    case .handler(let handler):
      handler()
    case .taskGroupFinished(let group):
      taskGroupFinished(group)
    }
  }
}

/// An identifier of the calling thread, cheap enough to compare on every `track` call.
func currentThreadID() -> UInt {
  #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
  #else
    return UInt(pthread_self())
  #endif
}
