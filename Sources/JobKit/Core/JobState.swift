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
    /// Tracked. `cancel`: the job is stopping, so cancel the task.
    case tracked(node: TrackedTask, cancel: Bool)
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
  mutating func track(_ task: Operation, makeNode: (TaskGroupEntry) -> TrackedTask) -> TrackOutcome {
    guard lifecycle != .finished else { return .jobFinished }
    let id = ObjectIdentifier(task)
    let node = makeNode(group(for: type(of: task)))
    if let first = tracked.updateValue(node, forKey: id) {
      // Put the first registration back; the second is ignored.
      tracked[id] = first
      return .alreadyTracked
    }
    node.group.unfinished += 1
    return .tracked(node: node, cancel: stop != nil)
  }

  // MARK: Finishing tasks

  /// A tracked task finished. Returns `true` if the caller must take the router and route.
  mutating func taskFinished(_ node: TrackedTask) -> Bool {
    guard !node.isSignalled else { return false }
    node.isSignalled = true
    finished.append(node)
    guard router == .free else { return false }
    router = .held
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
    let group = node.group
    group.unfinished -= 1
    guard group.unfinished == 0, stop == nil else { return .none }
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
    case finish((any Error)?)
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
    return finish(nil)
  }

  /// The job is done: drop the group handlers too, so a handler that captured the job strongly
  /// does not keep it alive.
  private mutating func finish(_ error: (any Error)?) -> Step {
    lifecycle = .finished
    groups = [:]
    lastGroup = nil
    groupsDueAfterMain = []
    return .finish(error)
  }

  // MARK: Stopping

  /// Stops the job (first reason wins). Returns the unfinished tasks the caller must cancel.
  mutating func stop(_ reason: Stop) -> [Operation] {
    guard stop == nil, lifecycle != .finished else { return [] }
    stop = reason
    return tracked.values.compactMap { $0.isSignalled ? nil : $0.task }
  }

  var shouldDeliverCallbacks: Bool { stop == nil }
}
