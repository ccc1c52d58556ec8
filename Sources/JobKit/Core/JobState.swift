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
  /// Every failure routed so far, in routing order.
  var failures: [TaskFailure] = []
  /// Who listens to `events`; empty (and free) when nobody does.
  var listeners = JobEventListeners()
  /// How many tasks were tracked and routed, for `progress`.
  var trackedCount: Int64 = 0
  var routedCount: Int64 = 0
  /// The job's `Progress`, created when first read; until then tracking pays nothing for it.
  var progress: Progress?

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
    case tracked(node: TrackedTask, cancel: Bool, queueNow: Bool, waitsForSlot: Bool, observeStart: Bool)
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
    trackedCount += 1
    if let progress {
      addToProgress(progress, node: node, task: task)
    }
    let observeStart = !listeners.isEmpty
    if observeStart {
      let extras = node.extras ?? TaskExtras()
      node.extras = extras
      extras.trackedAt = .now
      listeners.yield(.taskTracked(task: task.name ?? group.name, group: group.name, at: .now))
    }
    if let previous {
      forget(previous)
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
      node: node, cancel: stop != nil, queueNow: queueNow, waitsForSlot: waitsForSlot, observeStart: observeStart)
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

  /// Drops `node` without routing it (a retried attempt replaced by the next one).
  private mutating func forget(_ node: TrackedTask) {
    if let task = node.task {
      tracked.removeValue(forKey: ObjectIdentifier(task))
    }
    node.task = nil
    node.group.unfinished -= 1
    trackedCount -= 1
    if let progress {
      ProgressLock.withLock { progress.totalUnitCount -= 1 }
    }
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
    var timeout: DispatchWorkItem?
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

  /// Arms `item` as `node`'s timeout. Returns `false` if the task already finished.
  mutating func armTimeout(_ item: DispatchWorkItem, for node: TrackedTask) -> Bool {
    guard !node.isSignalled, let extras = node.extras else { return false }
    extras.timeout = item
    return true
  }

  /// `node`'s timeout expired. Returns the task to cancel if it is still running.
  mutating func timeoutExpired(for node: TrackedTask) -> Operation? {
    guard !node.isSignalled, let extras = node.extras, extras.timeout != nil,
      let task = node.task, !task.isFinished
    else { return nil }
    extras.timeout = nil
    extras.timedOut = true
    return task
  }

  /// An attempt of a retried task failed and may be retried after a delay. Returns `false` if the
  /// job is stopping (the attempt is then routed as the last one).
  mutating func beginRetry(of node: TrackedTask, after item: DispatchWorkItem) -> Bool {
    guard stop == nil, !node.isSignalled, let extras = node.extras else { return false }
    extras.pendingRetry = item
    return true
  }

  /// The retry delay ended. Returns `true` if the caller must now track the next attempt
  /// (`false` if a stop already routed the failed attempt).
  mutating func claimRetry(of node: TrackedTask) -> Bool {
    guard let extras = node.extras, extras.pendingRetry != nil, stop == nil else { return false }
    extras.pendingRetry = nil
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
  /// due now, if `node` was its group's last unfinished task.
  mutating func routed(_ node: TrackedTask) -> GroupOutcome {
    if let task = node.task {
      tracked.removeValue(forKey: ObjectIdentifier(task))
    }
    node.task = nil
    routedCount += 1
    if let progress, node.extras?.progressByChild != true {
      ProgressLock.withLock { progress.completedUnitCount += 1 }
    }
    let group = node.group
    group.unfinished -= 1
    guard group.unfinished == 0 else { return .none }
    listeners.yield(.groupFinished(group: group.name, at: .now))
    guard stop == nil else { return .none }
    if lifecycle == .runningMain {
      if !groupsDueAfterMain.contains(where: { $0 === group }) {
        groupsDueAfterMain.append(group)
      }
      return .none
    }
    return groupCallback(for: group)
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
    /// Finish the job with this error, then end these event streams.
    case finish((any Error)?, [AsyncStream<JobEvent>.Continuation])
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
  /// does not keep it alive.
  private mutating func finish(_ error: (any Error)?) -> Step {
    lifecycle = .finished
    groups = [:]
    lastGroup = nil
    groupsDueAfterMain = []
    completeProgress()
    listeners.yield(.finished(error: error, at: .now))
    return .finish(error, listeners.removeAll())
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
    /// The progress's fraction, if the progress was ever read.
    let fraction: Double?
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
      tracked: trackedCount, routed: routedCount,
      fraction: progress.map { progress in ProgressLock.withLock { progress.fractionCompleted } })
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
    var timers: [DispatchWorkItem] = []
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
        if let timeout = extras.timeout {
          actions.timers.append(timeout)
          extras.timeout = nil
        }
        if let retry = extras.pendingRetry {
          // The failed attempt is the task's last one: route it now (silently).
          actions.timers.append(retry)
          extras.pendingRetry = nil
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

  /// Installs `created` as the job's progress unless one exists; returns the one in use. Counts
  /// the tasks tracked and routed so far, and adopts the progress of unrouted tasks that report
  /// their own as children.
  mutating func installProgress(_ created: Progress) -> Progress {
    if let progress { return progress }
    progress = created
    ProgressLock.withLock {
      created.totalUnitCount = trackedCount - Int64(tracked.count)
      created.completedUnitCount = routedCount
    }
    for node in tracked.values {
      if let task = node.task {
        trackedCount -= 1
        addToProgress(created, node: node, task: task)
        trackedCount += 1
      }
    }
    if lifecycle == .finished {
      completeProgress()
    }
    return created
  }

  /// Adds one tracked task to the job's progress: one unit, which the task's own progress fills
  /// if it reports one (a nested job), else the job completes when it routes the task.
  private func addToProgress(_ progress: Progress, node: TrackedTask, task: Operation) {
    // Read a reporting task's progress before taking the progress lock: a nested job creates
    // its progress under that lock.
    let child = (task as? any ProgressReporting)?.progress
    ProgressLock.withLock {
      // `addChild` fills one of the parent's units: that unit must be counted in its total.
      progress.totalUnitCount += 1
      if let child {
        progress.addChild(child, withPendingUnitCount: 1)
      }
    }
    if child != nil {
      let extras = node.extras ?? TaskExtras()
      node.extras = extras
      extras.progressByChild = true
    }
  }

  /// The job finished: its progress shows every unit done (an empty job shows 1 of 1).
  private func completeProgress() {
    guard let progress else { return }
    ProgressLock.withLock {
      progress.totalUnitCount = max(1, progress.totalUnitCount)
      progress.completedUnitCount = progress.totalUnitCount
    }
  }
}

/// Serializes every change JobKit makes to a `Progress`, and JobKit's reads of one:
/// swift-corelibs-foundation's `Progress` is not thread-safe, and a child's update writes into
/// its parent. Always taken last (never while calling user code).
enum ProgressLock {
  private static let lock = NSLock()

  static func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body()
  }
}
