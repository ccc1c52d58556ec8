import Foundation

/// The state of one ``JobController``, composed of one value per concern: the ``JobPhase``
/// (lifecycle, stop reason, router), the ``TaskRegistry`` (tracked, finished and per-type
/// tasks), failures, event listeners and ``ProgressState``. Limits and timers live in
/// `JobState+Limits.swift` and `JobState+Timers.swift`.
///
/// Changed only by the transitions below, under the job's lock; each returns what the caller
/// must do after releasing it. No transition calls user code, an overridable member of a user
/// type, a continuation, KVO, `Progress` or a clock.
struct JobState {
  typealias Stop = JobStop

  var phase = JobPhase.initial
  var registry = TaskRegistry()
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
  /// Holds taken with `holdOpen()`: while one is out, the job does not finish, even with nothing
  /// tracked; `allTasksFinished()` runs again once the last is released.
  private(set) var holds = 0
  /// Tasks held back while the job is suspended (`JobState+Suspension.swift`).
  var suspension = JobSuspension()

  // MARK: Submission and start

  /// The job started on `thread`. Returns `true` if `main()` must be called (`false` if the job
  /// was stopped first).
  mutating func beginMain(on thread: UInt) -> Bool {
    let runsMain = phase.beginMain(on: thread)
    listeners.yield(.started)
    return runsMain
  }

  /// `main()` returned; the caller keeps the router and routes.
  mutating func mainReturned() {
    phase.mainReturned()
  }

  // MARK: Tracking

  enum TrackOutcome {
    /// Tracked. `cancel`: the job is stopping, so cancel the task. `queueNow`: add it to the
    /// queue now. `waitsForSlot`: its group has a limit; once its finish is observed, the caller
    /// hands it to `admitOrWait` (not before: an admitted task may start at once, and its finish
    /// must not be missed). A job-queued task of a limited group is queued only with a slot,
    /// whatever the phase: a stop cancels it, it does not let it skip the line.
    /// `observesEvents`: events are listened to, so the caller registers for the task's start
    /// and confirms it with `confirmTracked`. `publish`: the progress to
    /// publish the new counts to. `replaced`: the replaced attempt's task, handed out so that its
    /// last reference is not dropped (and its `deinit` run) under the lock.
    case tracked(
      node: TrackedTask, cancel: Bool, queueNow: Bool, waitsForSlot: Bool, observesEvents: Bool, publish: Progress?,
      replaced: Operation?)
    case jobFinished
  }

  /// Starts tracking `task` with the node `makeNode` builds (it only allocates; no user code).
  /// `queue` is where the job will queue it (`nil` if the caller queues it). `replacing` is a
  /// retried task's previous attempt, forgotten silently once the new one is tracked. For
  /// events, the attempts are one task: a `taskTracked` already emitted for an earlier attempt
  /// is not emitted again.
  mutating func track(
    _ task: Operation,
    queue: OperationQueue?,
    replacing previous: TrackedTask? = nil,
    makeNode: (TaskGroupEntry) -> TrackedTask
  ) -> TrackOutcome {
    guard !phase.isFinished else { return .jobFinished }
    let node = makeNode(registry.group(for: type(of: task)))
    registry.insert(node)
    var publish = progress.tracked(task)
    let observesEvents = !listeners.isEmpty
    if observesEvents {
      node.extrasForUpdate().observesEvents = true
    }
    var replaced: Operation?
    if let previous {
      if observesEvents, let trackedAt = previous.extras?.trackedAt {
        node.extrasForUpdate().trackedAt = trackedAt
      }
      replaced = previous.task
      publish = forget(previous) ?? publish
    }
    var queueNow = queue != nil
    var waitsForSlot = false
    if let queue, node.group.limit != nil || suspension.isSuspended {
      node.extrasForUpdate().pendingQueue = queue
      queueNow = false
      waitsForSlot = true
    }
    return .tracked(
      node: node, cancel: phase.isStopping, queueNow: queueNow, waitsForSlot: waitsForSlot,
      observesEvents: observesEvents, publish: publish, replaced: replaced)
  }

  /// A tracked task's finish is observed and events are listened to: record when, and emit
  /// `taskTracked`. `name` is the task's `name`, read by the caller with no lock held. Does
  /// nothing if the task's finish was reported first (it finished meanwhile, and its
  /// `taskTracked` went out with its `taskFinished`). Returns the followers of nested jobs to
  /// tell if the task is a job (usually none).
  mutating func confirmTracked(_ node: TrackedTask, name: String?, at now: ContinuousClock.Instant)
    -> [any NestedJobFollower]
  {
    guard node.isRegistered, let extras = node.extras, extras.trackedAt == nil else { return [] }
    extras.trackedAt = now
    listeners.yield(.taskTracked(task: name ?? node.group.name, group: node.group.name))
    return listeners.nestedJobFollowers
  }

  /// `node` turned out to be tracked by this job already (found where its finish is observed):
  /// drop the second registration. Returns the progress to publish to, if any.
  mutating func untrackDuplicate(_ node: TrackedTask) -> Progress? {
    forget(node)
  }

  /// Drops `node` without routing it (a duplicate, or a retried attempt replaced by the next
  /// one). Returns the progress to publish to, if any.
  private mutating func forget(_ node: TrackedTask) -> Progress? {
    guard node.isRegistered else { return nil }
    registry.remove(node)
    let publish = node.task.flatMap { progress.forgot($0) }
    node.task = nil
    return publish
  }

  /// A tracked `ConcurrentOperation` started (only observed while events are listened to);
  /// `name` and `now` were read by the caller with no lock held.
  mutating func taskStarted(_ node: TrackedTask, name: String?, at now: ContinuousClock.Instant) {
    guard let extras = node.extras, node.task != nil, !extras.finishReported else { return }
    extras.startedAt = now
    listeners.yield(.taskStarted(task: name ?? node.group.name, group: node.group.name))
  }

  // MARK: Finishing tasks

  struct FinishActions {
    /// The caller must take the router and route.
    var route = false
    /// A task of the same group admitted to the slot this one freed: the caller queues it.
    var admitted: [Admission] = []
    /// The task's armed timeout, to cancel.
    var timeout: (any JobTimer)?
  }

  /// A tracked task finished (or, for a retried task, finished its last attempt). `now` is set
  /// when the task's events are observed.
  mutating func taskFinished(_ node: TrackedTask, at now: ContinuousClock.Instant? = nil) -> FinishActions {
    guard !node.isSignalled else { return FinishActions() }
    node.isSignalled = true
    var actions = FinishActions()
    if let extras = node.extras {
      actions.admitted = releaseSlot(of: node)
      extras.timeoutArmed = false
      actions.timeout = extras.timeout
      extras.timeout = nil
      extras.finishedAt = now
    }
    registry.appendFinished(node)
    actions.route = phase.takeRouterIfFree()
    return actions
  }

  /// Called by a `track` call on `thread`: if `thread` runs `main()` and is not routing already,
  /// takes the finished tasks to route now (per-task callbacks only). The caller routes the batch
  /// and then calls `nextBatchInMain()` until it returns an empty batch.
  mutating func beginRoutingInMain(on thread: UInt) -> [TrackedTask] {
    guard !registry.finished.isEmpty, phase.beginRoutingInMain(on: thread) else { return [] }
    return registry.takeFinished()
  }

  /// The next batch for the routing started by `beginRoutingInMain`, or `[]` when it is done.
  mutating func nextBatchInMain() -> [TrackedTask] {
    guard phase.isRoutingInMain else { return [] }
    if registry.finished.isEmpty {
      phase.endRoutingInMain()
      return []
    }
    return registry.takeFinished()
  }

  enum RoutingDecision {
    /// Deliver the per-task callback.
    case deliver
    /// Skip it (the job is stopping).
    case skip
    /// This failure fails the job (`.failFast`): cancel these tasks, skip the callback.
    case failFast(StopActions)
  }

  /// The router is about to route `node`: record its failure (if any) and decide whether its
  /// per-task callback runs. `isCancelled` tells whether a failed task was cancelled (it is only
  /// read for a failure); `name` is the
  /// task's `name` if its events are observed.
  mutating func beginRouting(_ node: TrackedTask, failure: TaskFailure?, isCancelled: Bool, name: String?)
    -> RoutingDecision
  {
    if let extras = node.extras, extras.observesEvents {
      reportFinish(of: node, extras, name: name, error: failure?.error)
    }
    if let failure, !(phase.isStopping && isCancelled) {
      failures.append(failure)
      if failurePolicy == .failFast, !phase.isStopping {
        return .failFast(stop(.failed(failure.error)))
      }
    }
    return phase.isStopping ? .skip : .deliver
  }

  /// Emits `node`'s `taskFinished` event as it is routed, once: every task whose events are
  /// observed gets exactly one, whatever ended it (a retried task's attempts are one task: the
  /// routed attempt reports). If its `taskTracked` was not emitted yet (it finished before the
  /// tracking thread confirmed it), that goes first. The duration runs from its observed start,
  /// or its tracking, to `extras.finishedAt`.
  mutating func reportFinish(of node: TrackedTask, _ extras: TaskExtras, name: String?, error: (any Error)?) {
    guard !extras.finishReported else { return }
    extras.finishReported = true
    let task = name ?? node.group.name
    if extras.trackedAt == nil {
      extras.trackedAt = extras.finishedAt
      listeners.yield(.taskTracked(task: task, group: node.group.name))
    }
    let begin = extras.startedAt ?? extras.trackedAt
    let duration = extras.finishedAt.flatMap { end in begin.map { end - $0 } } ?? .zero
    listeners.yield(.taskFinished(task: task, group: node.group.name, duration: duration, error: error))
  }

  enum GroupOutcome {
    case none
    case handler(@Sendable () -> Void)
    case taskGroupFinished(Operation.Type)
  }

  /// The router delivered `node`'s per-task callback: forget the task. Returns the group callback
  /// due now, if `node` was its group's last unfinished task, and the progress to publish to.
  mutating func routed(_ node: TrackedTask) -> (GroupOutcome, publish: Progress?) {
    let publish = node.task.flatMap { progress.routed($0) }
    node.task = nil
    guard registry.remove(node) else { return (.none, publish) }
    let group = node.group
    listeners.yield(.groupFinished(group: group.name))
    guard !phase.isStopping else { return (.none, publish) }
    if phase.isRunningMain {
      registry.deferGroupCallback(group)
      return (.none, publish)
    }
    return (groupCallback(for: group), publish)
  }

  private func groupCallback(for group: TaskGroupEntry) -> GroupOutcome {
    if let handler = group.handler { return .handler(handler) }
    return .taskGroupFinished(group.type)
  }

  // MARK: The router's next step

  enum Step {
    case route([TrackedTask])
    case group(GroupOutcome)
    case allTasksFinished
    /// Finish the job (see ``JobFinish``).
    case finish(JobFinish)
    /// Stop routing: nothing is left, or another thread finishes the job.
    case release
  }

  mutating func nextStep() -> Step {
    if !phase.isStopping, let group = registry.nextDeferredGroup() {
      return .group(groupCallback(for: group))
    }
    if !registry.finished.isEmpty {
      return .route(registry.takeFinished())
    }
    if registry.isEmpty, holds == 0 {
      switch phase.stop {
      case nil:
        listeners.yield(.allTasksFinished)
        return .allTasksFinished
      case .cancelled:
        return finish(nil)
      case .failed(let error):
        return finish(error)
      }
    }
    phase.releaseRouter()
    return .release
  }

  /// `allTasksFinished()` returned. Returns the finish step if it tracked nothing new, else `nil`.
  mutating func allTasksFinishedReturned() -> Step? {
    guard registry.isEmpty, registry.finished.isEmpty, holds == 0 else { return nil }
    if case .failed(let error) = phase.stop { return finish(error) }
    if !phase.isStopping, failurePolicy == .collect, !failures.isEmpty {
      return finish(JobFailures(failures))
    }
    return finish(nil)
  }

  /// The job is done: drop the group handlers too, so a handler that captured the job strongly
  /// does not keep it alive. If another thread is publishing progress, it finishes the job once
  /// it wrote the final counts (``ProgressState/finish(_:)``); the router then just stops.
  private mutating func finish(_ error: (any Error)?) -> Step {
    var cancelled = false
    if case .cancelled? = phase.stop { cancelled = true }
    phase.finish()
    let droppedGroups = registry.dropGroups()
    listeners.yield(.finished(error: error))
    listeners.close()
    let graceTimer = graceTimer
    self.graceTimer = nil
    var finish = JobFinish(error: error, publish: nil, graceTimer: graceTimer, droppedGroups: droppedGroups)
    finish.cancelled = cancelled
    guard let now = progress.finish(finish) else {
      return .release
    }
    return .finish(now)
  }

  // MARK: Holds

  /// Takes a hold that keeps the job from finishing. Returns `false` if it already finished.
  mutating func holdOpen() -> Bool {
    guard !phase.isFinished else { return false }
    holds += 1
    return true
  }

  /// Releases a hold. Returns `true` if the caller must take the router and route: the last hold
  /// is gone, nothing is tracked and nobody routes.
  mutating func releaseHold() -> Bool {
    guard holds > 0 else { return false }
    holds -= 1
    guard holds == 0, registry.isEmpty else { return false }
    return phase.takeRouterIfFree()
  }

  // MARK: Stopping

  struct StopActions {
    /// Unfinished tasks to cancel. Those waiting for a group slot stay in line: each is queued
    /// once it gets a slot, and finishes at once, without running.
    var cancel: [Operation] = []
    /// Armed timeouts and pending retries to cancel.
    var timers: [any JobTimer] = []
    /// A pending retry was turned into a finished task: the caller must take the router.
    var route = false
    /// The stop was recorded now, with tasks still tracked: the caller arms the grace period.
    var armsGrace = false
    /// Tasks a suspension held back, let go by the stop: the caller queues them after the
    /// cancels, so they finish without running.
    var admitted: [Admission] = []
  }

  /// Stops the job (first reason wins). Returns what the caller must cancel or release.
  mutating func stop(_ reason: Stop) -> StopActions {
    var actions = StopActions()
    guard phase.recordStop(reason) else { return actions }
    actions.admitted = endSuspensionForStop()
    actions.armsGrace = cancellationGracePeriod != nil && !registry.isEmpty
    var retriesEnded: [TrackedTask] = []
    for node in registry.nodes where !node.isSignalled {
      if let extras = node.extras {
        actions.timers += extras.disarmTimeout()
        if let retryTimer = extras.endPendingRetry() {
          // The failed attempt is the task's last one: route it now (silently).
          actions.timers += retryTimer
          retriesEnded.append(node)
          continue
        }
      }
      if let task = node.task { actions.cancel.append(task) }
    }
    for node in retriesEnded {
      node.isSignalled = true
      registry.appendFinished(node)
    }
    if !registry.finished.isEmpty {
      actions.route = phase.takeRouterIfFree()
    }
    return actions
  }
}
