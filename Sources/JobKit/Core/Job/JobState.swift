import Foundation

/// The state of one ``JobController``, composed of one value per concern: its
/// ``OperationState`` (its life as an operation), the ``JobPhase`` (lifecycle, stop reason), the ``TaskRegistry`` (tracked and per-type tasks), the ``Outbox``
/// (what waits to be done after the lock: routing, events, progress, and its one drainer),
/// failures, event listeners and ``ProgressState``. Limits, timers and dependencies live in
/// `JobState+Limits.swift`, `JobState+Timers.swift` and `JobState+Dependencies.swift`, setting
/// changes in `JobState+Settings.swift`, draining in `Outbox.swift`.
///
/// Changed only by its transitions (`.ci/check-transitions`), under the job's lock; each
/// returns what the caller must do after releasing it. No transition calls user code, an overridable member of a user
/// type, a continuation, KVO, `Progress` or a clock.
struct JobState {
  typealias Stop = JobStop

  /// The job's life as an operation (start, cancel, reason, suspension, finish): one lock.
  var operation = OperationState()
  var phase = JobPhase.initial
  var registry = TaskRegistry()
  /// Finished tasks to route, events to deliver, progress to publish; and who drains them.
  var outbox = Outbox<TaskNode, PendingJobEvent>()
  var failurePolicy = FailurePolicy.ignore
  /// Every failure routed so far, in routing order.
  var failures: [TaskFailure] = []
  /// Who listens to `events`; empty (and free) when nobody does.
  var listeners = JobEventListeners()
  /// Tracked and routed counts, and the `Progress` they are published to once it was read.
  var progress = ProgressState()
  /// Where retry delays and timeouts wait.
  var clock: any JobClock = DispatchJobClock()
  /// How long after a stop unfinished tasks are reported (`nil`: never), and the timer doing it.
  var cancellationGracePeriod: Duration? = .seconds(10)
  var graceTimer: (any JobTimer)?
  /// `timeLimit`, and what admissions leave to do after the lock (`JobState+Limits.swift`).
  var timeLimit = TimeLimit()
  var afterLockEffects = AfterLockEffects()
  /// Whether the job is suspended, and its children told (`JobState+Suspension.swift`).
  var suspension = JobSuspension()
  /// Every task waiting for its turn, the resume, a slot or its dependencies
  /// (`Policies/JobAdmission.swift`, `JobState+Dependencies.swift`).
  var admission = JobAdmission()
  /// The job's reference to itself while something that does not hold it may call it.
  var keeper = JobKeeper()

  // MARK: Submission and start

  /// The job started on `thread`. Returns `true` if `main()` must be called (`false` if the job
  /// was stopped first).
  /// `job` (`nil` in the state machine's tests) holds itself until it finishes (`JobKeeper`).
  mutating func beginMain(on thread: UInt, keeping job: JobController? = nil) -> Bool {
    if let job {
      keeper.start(job)
    }
    let runsMain = phase.beginMain(on: thread)
    emit(.started)
    return runsMain
  }

  /// `main()` returned: every callback may run now.
  mutating func mainReturned() {
    phase.mainReturned()
  }

  /// Records `event` for delivery if anybody listens.
  mutating func emit(_ event: @autoclosure () -> PendingJobEvent) {
    guard !listeners.isEmpty else { return }
    outbox.yield(event())
  }

  /// Tells the outbox that a published progress must show new counts.
  private mutating func progressChanged(_ changed: Bool) {
    if changed { outbox.progressDidChange() }
  }

  // MARK: Tracking

  enum TrackOutcome {
    /// Tracked. `cancel`: the job is stopping, so cancel the task. `queueNow`: add it to the
    /// queue now. `waitsForSlot`: its group has a limit, or the job is suspended; once its
    /// finish is observed, the caller hands it to `admitOrWait` (not before: an admitted task may
    /// start at once, and its finish must not be missed). A job-queued task of a limited group
    /// is queued only with a slot, whatever the phase: a stop cancels it, it does not let it
    /// skip the line; a suspended job's task waits for the resume (`JobState+Suspension.swift`).
    /// `observesEvents`: events are listened to, so the caller registers for the task's start
    /// and confirms it with `confirmTracked`. `replaced`: the replaced attempt's task, handed out
    /// so that its last reference is not dropped (and its `deinit` run) under the lock.
    case tracked(
      node: TaskNode, cancel: Bool, queueNow: Bool, waitsForSlot: Bool, observesEvents: Bool, replaced: Operation?)
    case jobFinished
    /// `bounded` and the task's group has as many tasks waiting as its bound allows: nothing
    /// was tracked (`tryTrackAndQueue`).
    case refused
  }

  /// Starts tracking `task` with `node` (made for it), and sets the node's group (the node is made before the lock,
  /// so allocating it adds nothing to the job's critical section). `queue` is where the job will
  /// queue it (`nil` if the caller queues it). `replacing` is a retried task's previous attempt,
  /// forgotten silently once the new one is tracked. For events, the attempts are one task: a
  /// `taskTracked` already emitted for an earlier attempt is not emitted again.
  /// `waitsForDependencies`: the task is neither queued nor admitted now; once its finish is
  /// observed, the caller hands it to `waitForDependencies` (`JobState+Dependencies.swift`).
  /// `bounded`: refuse the task if its group's bound on waiting tasks is reached
  /// (`JobState+Limits.swift`). `waitsForAdmission`: not queued now; once observed, the caller
  /// hands it to `enterAdmission` (`Policies/JobAdmission.swift`).
  mutating func track(
    _ task: Operation, node: TaskNode, queue: OperationQueue?, replacing previous: TaskNode? = nil,
    waitsForDependencies: Bool = false, bounded: Bool = false, waitsForAdmission: Bool = false
  ) -> TrackOutcome {
    guard !phase.isFinished else { return .jobFinished }
    node.join(registry.group(for: type(of: task)))
    if bounded, !acceptUnderBound(node.typeEntry) { return .refused }
    registry.insert(node)
    if phase.isIdle, !waitsForAdmission {
      // Before the start, only a task the job hands out keeps it alive (see `JobKeeper`).
      keeper.keep(for: node)
    }
    if admission.usesDependencies || waitsForDependencies {
      indexForDependencies(node, task, activating: waitsForDependencies)
    }
    progressChanged(progress.tracked(task))
    // A task waiting for admission is observed once it leaves the line (`JobAdmission`).
    let observesEvents = !listeners.isEmpty && !waitsForAdmission
    if observesEvents {
      let timing = TaskTiming()
      timing.trackedAt = previous?.timing?.trackedAt
      node.time(with: timing)
    }
    var replaced: Operation?
    if let previous {
      replaced = previous.task
      forget(previous)
    }
    var queueNow = queue != nil && !waitsForDependencies && !waitsForAdmission
    if waitsForAdmission, let queue {
      // Waiting from now on, for inspection too, though it enters the line only once observed.
      node.wait(for: .turn, on: queue)
    }
    var waitsForSlot = false
    if queueNow, node.typeEntry.limit != nil || node.typeEntry.rate != nil || suspension.isSuspended {
      queueNow = false
      waitsForSlot = true
    }
    return .tracked(
      node: node, cancel: phase.isStopping, queueNow: queueNow, waitsForSlot: waitsForSlot,
      observesEvents: observesEvents, replaced: replaced)
  }

  /// A tracked task's finish is observed and events are listened to: record when, and emit
  /// `taskTracked`. `name` is the task's `name`, read by the caller with no lock held. Does
  /// nothing if the task's finish was reported first (it finished meanwhile, and its
  /// `taskTracked` went out with its `taskFinished`). Returns the followers of nested jobs to
  /// tell if the task is a job (usually none).
  mutating func confirmTracked(_ node: TaskNode, name: String?, at now: ContinuousClock.Instant)
    -> [any NestedJobFollower]
  {
    guard node.state.isRegistered, let timing = node.timing, timing.trackedAt == nil else { return [] }
    timing.trackedAt = now
    emit(.taskTracked(task: name ?? node.typeEntry.name, group: node.typeEntry.name))
    return listeners.nestedJobFollowers
  }

  /// `node` turned out to be tracked by this job already (found where its finish is observed):
  /// drop the second registration.
  mutating func untrackDuplicate(_ node: TaskNode) {
    forget(node)
  }

  /// Drops `node` without routing it (a duplicate, or a retried attempt replaced by the next
  /// one).
  private mutating func forget(_ node: TaskNode) {
    guard node.state.isRegistered else { return }
    registry.remove(node)
    if keeper.isKeptByTasks {
      afterLockEffects.release(keeper.letGo(of: node))
    }
    forgetForDependencies(node)
    if let task = node.task {
      progressChanged(progress.forgot(task))
    }
    _ = node.letGoOfTask()
  }

  /// A tracked `ConcurrentOperation` started (only observed while events are listened to);
  /// `name` and `now` were read by the caller with no lock held.
  mutating func taskStarted(_ node: TaskNode, name: String?, at now: ContinuousClock.Instant) {
    guard let timing = node.timing, node.task != nil, !timing.finishReported else { return }
    timing.startedAt = now
    emit(.taskStarted(task: name ?? node.typeEntry.name, group: node.typeEntry.name))
  }

  // MARK: Finishing tasks

  /// What a finished task leaves to do after the lock. A class, made only when there is
  /// something: a plain task's `nil` is copied out of the lock for free.
  final class FinishActions {
    /// A task of the same group admitted to the slot this one freed: the caller queues it.
    let exits: [TaskExit]
    /// The task's armed timeout, to cancel.
    let timeout: (any JobTimer)?

    init(exits: [TaskExit], timeout: (any JobTimer)?) {
      self.exits = exits
      self.timeout = timeout
    }
  }

  /// A tracked task finished (or, for a retried task, finished its last attempt). `now` is set
  /// when the task's events are observed; `report` is what the finishing thread read from it.
  /// Returns `nil` when there is nothing to do after the lock (a plain task: no slot, no
  /// timeout), so that the common case copies no arrays or existentials out of the lock.
  mutating func recordFinish(
    _ node: TaskNode, at now: ContinuousClock.Instant? = nil, report: FinishReport? = nil
  ) -> FinishActions? {
    guard let release = node.finish(report: report) else { return nil }
    node.timing?.finishedAt = now
    outbox.route(node)
    if keeper.isKeptByTasks {
      afterLockEffects.release(keeper.letGo(of: node))
    }
    guard release.slot || release.box != nil || release.leftLine != nil else { return nil }
    return FinishActions(exits: giveBack(release, of: node), timeout: release.timer)
  }

  enum RoutingDecision {
    /// Call the per-task callback.
    case call
    /// Skip it (the job is stopping).
    case skip
    /// This failure fails the job (`.failFast`): cancel these tasks, skip the callback. Boxed: it
    /// is rare, and a drainer's batch carries a decision for every routed task.
    indirect case failFast(StopActions)
  }

  /// The decision for a finished `node` whose finishing thread reported what routing needs
  /// (``FinishReport``), taken as the drainer takes it; `nil` if the drainer must read the
  /// task first (no report, or a timed-out task whose `isCancelled` was not read).
  mutating func decideFromReport(_ node: TaskNode) -> RoutingDecision? {
    guard case .finished(let timedOut, let report?) = node.state, let task = node.task else { return nil }
    let error = timedOut ? JobKitError.timedOut(task) : report.error
    guard let error else {
      return beginRouting(node, failure: nil, isCancelled: false, name: report.name, reason: report.reason)
    }
    guard let isCancelled = report.isCancelled else { return nil }
    return beginRouting(
      node, failure: TaskFailure(task: task, error: error), isCancelled: isCancelled, name: report.name,
      reason: report.reason)
  }

  /// The router is about to route `node`: record its failure (if any) and decide whether its
  /// per-task callback runs. `isCancelled` tells whether a failed task was cancelled (it is only
  /// read for a failure); `name` is the
  /// task's `name` if its events are observed; `reason` why it was stopped, for its event.
  mutating func beginRouting(
    _ node: TaskNode, failure: TaskFailure?, isCancelled: Bool, name: String?, reason: (any Error)? = nil
  ) -> RoutingDecision {
    if let timing = node.timing {
      reportFinish(of: node, timing, name: name, error: failure?.error ?? reason)
    }
    if let failure, !(phase.isStopping && isCancelled) {
      failures.append(failure)
      if failurePolicy == .failFast, !phase.isStopping {
        return .failFast(stop(.failed(failure.error)))
      }
    }
    return phase.isStopping ? .skip : .call
  }

  /// Emits `node`'s `taskFinished` event as it is routed, once: every task whose events are
  /// observed gets exactly one, whatever ended it (a retried task's attempts are one task: the
  /// routed attempt reports). If its `taskTracked` was not emitted yet (it finished before the
  /// tracking thread confirmed it), that goes first. The duration runs from its observed start,
  /// or its tracking, to `timing.finishedAt`.
  mutating func reportFinish(of node: TaskNode, _ timing: TaskTiming, name: String?, error: (any Error)?) {
    guard !timing.finishReported else { return }
    timing.finishReported = true
    let task = name ?? node.typeEntry.name
    if timing.trackedAt == nil {
      timing.trackedAt = timing.finishedAt
      emit(.taskTracked(task: task, group: node.typeEntry.name))
    }
    let begin = timing.startedAt ?? timing.trackedAt
    let duration = timing.finishedAt.flatMap { end in begin.map { end - $0 } } ?? .zero
    emit(.taskFinished(task: task, group: node.typeEntry.name, duration: duration, error: error))
  }

  enum GroupOutcome {
    case none
    case handler(@Sendable () -> Void)
    case taskGroupFinished(Operation.Type)
  }

  /// The router called (or skipped) `node`'s per-task callback: forget the task. Returns the group callback
  /// due now, if `node` was its group's last unfinished task.
  mutating func routed(_ node: TaskNode) -> GroupOutcome {
    if let task = node.task {
      progressChanged(progress.routed(task))
      if admission.usesDependencies {
        admission.routedForDependencies(node, as: ObjectIdentifier(task), object: task)
      }
    }
    _ = node.letGoOfTask()
    let last = registry.remove(node)
    if node.typeEntry.bound != nil {
      wakeIfRoom(in: node.typeEntry)
    }
    guard last else { return .none }
    let group: TaskTypeEntry = node.typeEntry
    emit(.groupFinished(group: group.name))
    guard !phase.isStopping else { return .none }
    if phase.isRunningMain {
      registry.deferGroupCallback(group)
      return .none
    }
    return groupCallback(for: group)
  }

  func groupCallback(for group: TaskTypeEntry) -> GroupOutcome {
    if let handler = group.handler { return .handler(handler) }
    return .taskGroupFinished(group.type)
  }

  // MARK: The drainer's next step

  /// What the drainer does once no finished task waits to be routed (see `nextDrain`).
  enum Step {
    case none
    case group(GroupOutcome)
    case allTasksFinished
    /// Finish the job (see ``JobFinish``).
    case finish(JobFinish)
  }

  /// Only once `main()` returned: a deferred group callback, `allTasksFinished()`, or the finish.
  mutating func nextStep() -> Step {
    if !phase.isStopping, registry.hasDeferredGroups, let group = registry.nextDeferredGroup() {
      return .group(groupCallback(for: group))
    }
    guard registry.isEmpty else { return stallIfNothingCanProgress() }
    switch phase.stop {
    case nil:
      emit(.allTasksFinished)
      return .allTasksFinished
    case .cancelled:
      return .finish(finish(nil))
    case .failed(let error):
      return .finish(finish(error))
    }
  }

  /// Whether ``nextStep()`` may have something to do (checked when a thread asks to drain).
  var hasStepDue: Bool {
    guard phase.hasMainReturned else { return false }
    return (registry.hasDeferredGroups && !phase.isStopping) || registry.isEmpty
      || (admission.usesDependencies && (admission.hasDependencyWaitEnds || isStalled))
  }

  /// `allTasksFinished()` returned. Returns the finish if it tracked nothing new, else `nil`.
  mutating func allTasksFinishedReturned() -> JobFinish? {
    guard registry.isEmpty else { return nil }
    if case .failed(let error) = phase.stop { return finish(error) }
    if !phase.isStopping, failurePolicy == .collect, !failures.isEmpty {
      return finish(JobFailures(failures))
    }
    return finish(nil)
  }

  /// The job is done: drop the group handlers too, so a handler that captured the job strongly
  /// does not keep it alive. Its last events and its final progress counts go out with the
  /// finish, before the job's `isFinished` becomes `true`.
  private mutating func finish(_ error: (any Error)?) -> JobFinish {
    let stop = phase.stop
    phase.finish()
    let droppedGroups = registry.dropGroups()
    wakeProducersForFinish(droppedGroups)
    afterLockEffects.release(keeper.finish())
    emit(.finished(error: error ?? stop?.eventError))
    listeners.close()
    progressChanged(progress.finish())
    let graceTimer = graceTimer
    self.graceTimer = nil
    return JobFinish(
      error: error, stop: stop, graceTimer: graceTimer, timeLimitTimer: timeLimit.end(),
      droppedGroups: droppedGroups)
  }
}
