import Foundation

/// The state of one ``JobController``: which tasks it tracks, which finished tasks wait to be
/// routed, and where in its life the job is. Changed only by the pure transitions below, under
/// the job's lock; each returns what the caller must do after releasing it.
///
/// Routing is serial: at most one thread at a time holds the router and runs `main()` or
/// callbacks. A thread that signals a finished task while nobody holds the router takes it and
/// routes; otherwise the task waits in `finished` for the holder. The router is held from
/// creation until `main()` returned, so no callback runs before `main()` started; while `main()`
/// runs, its own `track` calls route the tasks that already finished (per-task callbacks only, on
/// `main()`'s thread), and group callbacks and `allTasksFinished()` wait until it returned.
struct JobState {
  enum Lifecycle: Equatable {
    /// Created, not handed to a queue by `startJob`/`run`.
    case created
    /// Handed to a queue by `startJob`/`run`, not started yet.
    case submitted
    /// `main()` is running.
    case runningMain
    /// `main()` returned; tasks are being routed.
    case routing
    case finished
  }

  enum Stop {
    case cancelled
    case failed(any Error)
  }

  /// Who may run callbacks now.
  enum Router: Equatable {
    /// Nobody: the next thread that signals a finished task takes the router.
    case free
    /// A thread is routing (or the job has not started yet).
    case held
    /// `main()` runs on `thread`; `routing` is `true` while one of its `track` calls routes.
    case heldByMain(thread: UInt, routing: Bool)
  }

  var lifecycle = Lifecycle.created
  /// Why the job stops early, if it does. Once set, no routing callback runs any more.
  var stop: Stop?
  var router = Router.held
  /// Every tracked task that has not been routed yet, by identity.
  var tracked: [ObjectIdentifier: TrackedTask] = [:]
  /// Tasks that finished and wait to be routed, in the order they finished.
  var finished: [TrackedTask] = []
  /// Groups that reached zero while `main()` ran; their callbacks are due once it returned.
  var groupsDueAfterMain: [TaskGroupEntry] = []
  /// Per dynamic task type: unfinished count and group handler.
  var groups: [ObjectIdentifier: TaskGroupEntry] = [:]
  /// The group of the most recently tracked task: most jobs track runs of one type.
  var lastGroup: TaskGroupEntry?
  var failurePolicy = FailurePolicy.ignore
  /// Where retry delays and timeouts wait.
  var clock: any JobClock = DispatchJobClock()
  /// Every failure routed so far, in routing order.
  var failures: [TaskFailure] = []
  /// Who listens to `events`; empty (and free) when nobody does.
  var listeners = JobEventListeners()
  /// Tracked and routed counts, and the `Progress` they are published to once it was read.
  var progress = ProgressState()
  /// A finish left to the thread that publishes progress (see `finish`).
  private var pendingFinish: JobFinish?

  // MARK: Submission and start

  /// `startJob`/`run` wants to submit the job. Returns `true` if the caller must add it to a queue.
  mutating func submit() -> Bool {
    guard lifecycle == .created else { return false }
    lifecycle = .submitted
    return true
  }

  /// The job started on `thread`. Returns `true` if `main()` must be called (`false` if the job
  /// was stopped first).
  mutating func beginMain(on thread: UInt) -> Bool {
    lifecycle = .runningMain
    listeners.yield(.started(at: .now))
    router = .heldByMain(thread: thread, routing: false)
    return stop == nil
  }

  /// `main()` returned; the caller keeps the router and routes.
  mutating func mainReturned() {
    lifecycle = .routing
    router = .held
  }

  // MARK: Tracking

  enum TrackOutcome {
    /// Tracked. `cancel`: the job is stopping, so cancel the task. `queueNow`: add it to the
    /// queue now. `waitsForSlot`: its group has a limit; once its finish is observed, the caller
    /// hands it to `admitOrWait` (not before: an admitted task may start at once, and its finish
    /// must not be missed). `observeStart`: events are listened to, so register for the task's
    /// start.
    /// `publish`: the progress to publish the new counts to.
    case tracked(
      node: TrackedTask, cancel: Bool, queueNow: Bool, waitsForSlot: Bool, observeStart: Bool, publish: Progress?)
    case alreadyTracked
    case jobFinished
  }

  mutating func group(for type: Operation.Type) -> TaskGroupEntry {
    if let lastGroup, lastGroup.type == type { return lastGroup }
    let key = ObjectIdentifier(type)
    let entry: TaskGroupEntry
    if let existing = groups[key] {
      entry = existing
    } else {
      entry = TaskGroupEntry(type: type)
      groups[key] = entry
    }
    lastGroup = entry
    return entry
  }

  /// Starts tracking `task` with the node `makeNode` builds (it only allocates; no user code).
  /// `queue` is where the job will queue it (`nil` if the caller queues it). `replacing` is a
  /// retried task's previous attempt, forgotten silently once the new one is tracked.
  mutating func track(
    _ task: Operation,
    queue: OperationQueue?,
    replacing previous: TrackedTask? = nil,
    makeNode: (TaskGroupEntry) -> TrackedTask
  ) -> TrackOutcome {
    guard lifecycle != .finished else { return .jobFinished }
    let id = ObjectIdentifier(task)
    let node = makeNode(group(for: type(of: task)))
    if let first = tracked.updateValue(node, forKey: id) {
      // Put the first registration back; the second is ignored.
      tracked[id] = first
      return .alreadyTracked
    }
    let group = node.group
    group.unfinished += 1
    var publish = progress.tracked(task)
    let observeStart = !listeners.isEmpty
    if observeStart {
      let extras = node.extras ?? TaskExtras()
      node.extras = extras
      extras.trackedAt = .now
      listeners.yield(.taskTracked(task: task.name ?? group.name, group: group.name, at: .now))
    }
    if let previous {
      publish = forget(previous) ?? publish
    }
    var queueNow = queue != nil
    var waitsForSlot = false
    if let queue, group.limit != nil, stop == nil {
      let extras = node.extras ?? TaskExtras()
      node.extras = extras
      extras.pendingQueue = queue
      queueNow = false
      waitsForSlot = true
    }
    return .tracked(
      node: node, cancel: stop != nil, queueNow: queueNow, waitsForSlot: waitsForSlot, observeStart: observeStart,
      publish: publish)
  }

  /// `node`, tracked with `waitsForSlot`, is observed now: it takes a free slot of its group if
  /// nobody waits for one (returns `true`: the caller queues it), else waits in line (`false`).
  /// A stopping job lets it go at once (`true`): it was cancelled and finishes without running.
  mutating func admitOrWait(_ node: TrackedTask) -> Bool {
    guard !node.isSignalled else { return false }
    let group = node.group
    guard stop == nil, let limit = group.limit else { return true }
    if group.running < limit, group.waitingCount == 0 {
      group.giveSlot(to: node)
      return true
    }
    group.enqueueWaiting(node)
    return false
  }

  /// Drops `node` without routing it (a retried attempt replaced by the next one). Returns the
  /// progress to publish to, if any.
  private mutating func forget(_ node: TrackedTask) -> Progress? {
    var publish: Progress?
    if let task = node.task {
      tracked.removeValue(forKey: ObjectIdentifier(task))
      publish = progress.forgot(task)
    }
    node.task = nil
    node.group.unfinished -= 1
    return publish
  }

  /// A tracked `ConcurrentOperation` started (only observed while events are listened to).
  mutating func taskStarted(_ node: TrackedTask) {
    guard let extras = node.extras, let task = node.task else { return }
    extras.startedAt = .now
    listeners.yield(.taskStarted(task: task.name ?? node.group.name, group: node.group.name, at: .now))
  }

  /// Sets a group's limit. Returns the waiting tasks it admits, to be queued by the caller.
  mutating func setLimit(_ limit: Int, for type: Operation.Type) -> [TrackedTask] {
    let group = group(for: type)
    group.limit = limit
    return stop == nil ? group.admitWaiting() : []
  }

  // MARK: Finishing tasks

  struct FinishActions {
    /// The caller must take the router and route.
    var route = false
    /// A task of the same group admitted to the slot this one freed: the caller queues it.
    var admitted: [TrackedTask] = []
    /// The task's armed timeout, to cancel.
    var timeout: (any JobTimer)?
  }

  /// A tracked task finished (or, for a retried task, finished its last attempt).
  mutating func taskFinished(_ node: TrackedTask) -> FinishActions {
    guard !node.isSignalled else { return FinishActions() }
    node.isSignalled = true
    var actions = FinishActions()
    if let extras = node.extras {
      if extras.holdsSlot {
        extras.holdsSlot = false
        node.group.running -= 1
        if stop == nil {
          actions.admitted = node.group.admitWaiting()
        }
      }
      extras.timeoutArmed = false
      actions.timeout = extras.timeout
      extras.timeout = nil
      if extras.trackedAt != nil {
        extras.finishedAt = .now
      }
    }
    finished.append(node)
    if router == .free {
      router = .held
      actions.route = true
    }
    return actions
  }

  // MARK: Timeouts and retries

  /// A timeout is about to be scheduled for `node`. Returns `false` if the task already finished
  /// (or the job stops): then no timeout is needed.
  mutating func armTimeout(for node: TrackedTask) -> Bool {
    guard !node.isSignalled, stop == nil, let extras = node.extras else { return false }
    extras.timeoutArmed = true
    return true
  }

  /// The timeout's timer was scheduled. Returns `false` if it is no longer needed (the task
  /// finished, the job stopped or the timeout already fired): the caller cancels it.
  mutating func timeoutScheduled(_ timer: any JobTimer, for node: TrackedTask) -> Bool {
    guard let extras = node.extras, extras.timeoutArmed else { return false }
    extras.timeout = timer
    return true
  }

  /// `node`'s task while its timeout is armed.
  func armedTask(of node: TrackedTask) -> Operation? {
    guard !node.isSignalled, node.extras?.timeoutArmed == true else { return nil }
    return node.task
  }

  /// `node`'s timeout expired (the caller saw its task unfinished). Returns the task to cancel,
  /// or `nil` if the task finished (or the job stopped) meanwhile.
  mutating func timeoutExpired(for node: TrackedTask) -> Operation? {
    guard !node.isSignalled, let extras = node.extras, extras.timeoutArmed, let task = node.task else { return nil }
    extras.timeoutArmed = false
    extras.timeout = nil
    extras.timedOut = true
    return task
  }

  /// An attempt of a retried task failed and may be retried. Returns `nil` if the job is
  /// stopping (the attempt is then routed as the last one); otherwise the attempt gives back its
  /// group slot, and the result lists the waiting tasks that slot admits (the caller queues
  /// them). The next attempt waits for a slot like any new task.
  mutating func beginRetry(of node: TrackedTask) -> [TrackedTask]? {
    guard stop == nil, !node.isSignalled, let extras = node.extras else { return nil }
    extras.retryPending = true
    guard extras.holdsSlot else { return [] }
    extras.holdsSlot = false
    node.group.running -= 1
    return node.group.admitWaiting()
  }

  /// The retry delay's timer was scheduled. Returns `false` if it is no longer needed (a stop
  /// routed the failed attempt): the caller cancels it.
  mutating func retryScheduled(_ timer: any JobTimer, for node: TrackedTask) -> Bool {
    guard let extras = node.extras, extras.retryPending else { return false }
    extras.retryTimer = timer
    return true
  }

  /// The retry delay ended. Returns `true` if the caller must now track the next attempt
  /// (`false` if a stop already routed the failed attempt).
  mutating func claimRetry(of node: TrackedTask) -> Bool {
    guard let extras = node.extras, extras.retryPending, stop == nil else { return false }
    extras.retryPending = false
    extras.retryTimer = nil
    return true
  }

  /// Called by a `track` call on `thread`: if `thread` runs `main()` and is not routing already,
  /// takes the finished tasks to route now (per-task callbacks only). The caller routes the batch
  /// and then calls `nextBatchInMain()` until it returns an empty batch.
  mutating func beginRoutingInMain(on thread: UInt) -> [TrackedTask] {
    guard !finished.isEmpty, router == .heldByMain(thread: thread, routing: false) else { return [] }
    router = .heldByMain(thread: thread, routing: true)
    return takeFinished()
  }

  /// The next batch for the routing started by `beginRoutingInMain`, or `[]` when it is done.
  mutating func nextBatchInMain() -> [TrackedTask] {
    guard case .heldByMain(let thread, routing: true) = router else { return [] }
    if finished.isEmpty {
      router = .heldByMain(thread: thread, routing: false)
      return []
    }
    return takeFinished()
  }

  private mutating func takeFinished() -> [TrackedTask] {
    let batch = finished
    finished = []
    return batch
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
  /// per-task callback runs. `isCancelled` tells whether the task was cancelled.
  mutating func beginRouting(_ node: TrackedTask, failure: TaskFailure?, isCancelled: Bool) -> RoutingDecision {
    if let extras = node.extras, let trackedAt = extras.trackedAt, let task = node.task {
      let end = extras.finishedAt ?? .now
      listeners.yield(
        .taskFinished(
          task: task.name ?? node.group.name, group: node.group.name, duration: end - (extras.startedAt ?? trackedAt),
          error: failure?.error, at: .now))
    }
    if let failure, !(stop != nil && isCancelled) {
      failures.append(failure)
      if failurePolicy == .failFast, stop == nil {
        return .failFast(stop(.failed(failure.error)))
      }
    }
    return stop == nil ? .deliver : .skip
  }

  enum GroupOutcome {
    case none
    case handler(@Sendable () -> Void)
    case taskGroupFinished(Operation.Type)
  }

  /// The router delivered `node`'s per-task callback: forget the task. Returns the group callback
  /// due now, if `node` was its group's last unfinished task, and the progress to publish to.
  mutating func routed(_ node: TrackedTask) -> (GroupOutcome, publish: Progress?) {
    var publish: Progress?
    if let task = node.task {
      tracked.removeValue(forKey: ObjectIdentifier(task))
      publish = progress.routed(task)
    }
    node.task = nil
    let group = node.group
    group.unfinished -= 1
    guard group.unfinished == 0 else { return (.none, publish) }
    listeners.yield(.groupFinished(group: group.name, at: .now))
    guard stop == nil else { return (.none, publish) }
    if lifecycle == .runningMain {
      if !groupsDueAfterMain.contains(where: { $0 === group }) {
        groupsDueAfterMain.append(group)
      }
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
    /// Finish the job with this error (after publishing the final counts to `publish`, if set),
    /// then end these event streams.
    case finish(JobFinish)
    case release
  }

  mutating func nextStep() -> Step {
    while !groupsDueAfterMain.isEmpty {
      let group = groupsDueAfterMain.removeFirst()
      if group.unfinished == 0, stop == nil {
        return .group(groupCallback(for: group))
      }
    }
    if !finished.isEmpty {
      return .route(takeFinished())
    }
    if tracked.isEmpty {
      switch stop {
      case nil:
        listeners.yield(.allTasksFinished(at: .now))
        return .allTasksFinished
      case .cancelled:
        return finish(nil)
      case .failed(let error):
        return finish(error)
      }
    }
    router = .free
    return .release
  }

  /// `allTasksFinished()` returned. Returns the finish step if it tracked nothing new, else `nil`.
  mutating func allTasksFinishedReturned() -> Step? {
    guard tracked.isEmpty, finished.isEmpty else { return nil }
    if case .failed(let error) = stop { return finish(error) }
    if stop == nil, failurePolicy == .collect, !failures.isEmpty {
      return finish(JobFailures(failures))
    }
    return finish(nil)
  }

  /// The job is done: drop the group handlers too, so a handler that captured the job strongly
  /// does not keep it alive. If another thread is publishing progress, it finishes the job once
  /// it wrote the final counts (``takePendingFinish()``); the router then just stops.
  private mutating func finish(_ error: (any Error)?) -> Step {
    lifecycle = .finished
    groups = [:]
    lastGroup = nil
    groupsDueAfterMain = []
    listeners.yield(.finished(error: error, at: .now))
    let finish = JobFinish(error: error, listeners: listeners.removeAll(), publish: nil)
    let (mayFinish, publish) = progress.finish()
    guard mayFinish else {
      pendingFinish = finish
      return .release
    }
    return .finish(JobFinish(error: finish.error, listeners: finish.listeners, publish: publish))
  }

  /// For the thread that published progress while the job finished: the finish it must perform.
  mutating func takePendingFinish() -> JobFinish? {
    defer { pendingFinish = nil }
    return pendingFinish
  }

  struct DebugSummary {
    struct Group {
      let name: String
      let unfinished: Int
      let limit: Int?
      let running: Int
      let waiting: Int
    }
    let lifecycle: String
    let unfinished: Int
    let groups: [Group]
    let failures: [TaskFailure]
    let tracked: Int64
    let routed: Int64
  }

  func debugSummary() -> DebugSummary {
    let stopText: String
    switch stop {
    case nil: stopText = ""
    case .cancelled: stopText = ", cancelled"
    case .failed(let error): stopText = ", failed: \(error)"
    }
    let groupSummaries = groups.values
      .filter { $0.unfinished > 0 || $0.limit != nil }
      .map {
        DebugSummary.Group(
          name: String(describing: $0.type), unfinished: $0.unfinished, limit: $0.limit, running: $0.running,
          waiting: $0.waitingCount)
      }
      .sorted { $0.name < $1.name }
    return DebugSummary(
      lifecycle: "\(lifecycle)\(stopText)", unfinished: tracked.count, groups: groupSummaries, failures: failures,
      tracked: progress.total, routed: progress.completed)
  }

  // MARK: Events and progress

  /// Adds an events listener. Returns `nil` if the job already finished.
  mutating func addListener(_ continuation: AsyncStream<JobEvent>.Continuation) -> UInt64? {
    guard lifecycle != .finished else { return nil }
    return listeners.add(continuation)
  }

  // MARK: Stopping

  struct StopActions {
    /// Unfinished tasks to cancel.
    var cancel: [Operation] = []
    /// Tasks that waited for a group slot: cancel them and add them to their queue, so they
    /// finish (without running) and are routed.
    var release: [(Operation, OperationQueue)] = []
    /// Armed timeouts and pending retries to cancel.
    var timers: [any JobTimer] = []
    /// A pending retry was turned into a finished task: the caller must take the router.
    var route = false
  }

  /// Stops the job (first reason wins). Returns what the caller must cancel or release.
  mutating func stop(_ reason: Stop) -> StopActions {
    var actions = StopActions()
    guard stop == nil, lifecycle != .finished else { return actions }
    stop = reason
    for node in tracked.values where !node.isSignalled {
      if let extras = node.extras {
        extras.timeoutArmed = false
        if let timeout = extras.timeout {
          actions.timers.append(timeout)
          extras.timeout = nil
        }
        if extras.retryPending {
          // The failed attempt is the task's last one: route it now (silently).
          extras.retryPending = false
          if let timer = extras.retryTimer {
            actions.timers.append(timer)
            extras.retryTimer = nil
          }
          node.isSignalled = true
          finished.append(node)
          continue
        }
      }
      if let task = node.task { actions.cancel.append(task) }
    }
    for group in groups.values {
      for node in group.removeAllWaiting() {
        if let task = node.task, let queue = node.extras?.pendingQueue {
          actions.release.append((task, queue))
        }
      }
    }
    if !finished.isEmpty, router == .free {
      router = .held
      actions.route = true
    }
    return actions
  }

  /// Installs `created` as the job's progress unless one exists. Returns the one in use, and
  /// whether the caller must publish the counts to it.
  mutating func installProgress(_ created: Progress) -> (Progress, publish: Bool) {
    progress.install(created, unrouted: tracked.values.lazy.compactMap(\.task))
  }
}

/// How a job finishes: its error, the event streams to end after it finished, and the progress
/// to publish the final counts to first.
struct JobFinish {
  let error: (any Error)?
  let listeners: [AsyncStream<JobEvent>.Continuation]
  let publish: Progress?
}
