import Foundation

/// What a job's transitions leave to be done once its lock is released (tasks to route, events
/// to deliver, progress to publish), and who does it: one thread at a time, the drainer.
///
/// Transitions append to it under the job's lock. With the same lock, the job's door
/// (`JobController.withJobState`) asks whether the thread that changed the state drains
/// (`JobState.claimDrain`, which asks ``claim(by:mayRoute:extra:)``). The drainer loops: take a
/// batch under the lock (`JobState.nextDrain`, with ``takeRoute(if:)`` and ``takeNested()``, which
/// also decides group callbacks and the finish), release it, perform the batch, repeat, until
/// `nextDrain` finds nothing and releases the drainer. ``take(mayRoute:)`` is the outbox's own
/// loop step, which its unit tests drive. Everything is performed in the order it was appended,
/// and exactly once.
///
/// A drainer whose callback changes the job's state on its own thread drains *nested*: events
/// and progress only, so they are not held back; routes stay for the outer loop, which keeps
/// callbacks one at a time.
///
/// `Route` is a finished task (a node of the job), `Event` a recorded event: generic so that it
/// is tested with plain values. `claimDrain` and `nextDrain` are in this file.
struct Outbox<Route, Event> {
  enum Drainer: Equatable {
    case idle
    /// `thread` drains.
    case busy(thread: UInt)
  }

  private(set) var drainer = Drainer.idle
  /// Finished tasks waiting to be routed, in the order they finished.
  private var routes = Line<Route>()
  private var events: [Event] = []
  /// The progress counts changed since they were last taken.
  private(set) var progressChanged = false

  var hasRoutes: Bool { !routes.isEmpty }
  var routeCount: Int { routes.count }
  var hasEvents: Bool { !events.isEmpty }

  // MARK: Appending (under the job's lock)

  mutating func route(_ route: Route) {
    routes.append(route)
  }

  mutating func yield(_ event: Event) {
    events.append(event)
  }

  mutating func progressDidChange() {
    progressChanged = true
  }

  /// Drops everything waiting (the job is freed abandoned, or its state reset).
  mutating func removeAllRoutes() {
    routes.removeAll()
  }

  // MARK: Draining

  enum Role: Equatable {
    /// Nothing for this thread to do.
    case none
    /// The thread became the drainer: it loops, taking batches (a job: `JobState.nextDrain`),
    /// until there is nothing left.
    case drainer
    /// The thread is the drainer already (inside a callback it runs): it performs
    /// ``takeNested()`` now.
    case nested
  }

  /// After a transition on `thread`: whether it drains, and how. It becomes the drainer when
  /// nobody drains and there is work it may do (`mayRoute`: whether it may take routes now, as
  /// the job's phase decides: while `main()` runs, only `main()`'s own thread routes, and only
  /// per-task callbacks; `extra`: the job has another step due, a group callback or the finish).
  mutating func claim(by thread: UInt, mayRoute: Bool, extra: Bool = false) -> Role {
    switch drainer {
    case .idle:
      guard hasWork(mayRoute: mayRoute) || extra else { return .none }
      drainer = .busy(thread: thread)
      return .drainer
    case .busy(thread):
      return events.isEmpty && !progressChanged ? .none : .nested
    case .busy:
      return .none
    }
  }

  /// One batch for the drainer: every waiting event, whether to publish progress, and the next
  /// route if `routes` allows. Empty when there is nothing; the caller then either performs a
  /// step of its own or calls ``release()``.
  struct Batch {
    var events: [Event] = []
    var publishProgress = false
    var route: Route?

    var isEmpty: Bool { events.isEmpty && !publishProgress && route == nil }
  }

  mutating func take(mayRoute: Bool) -> Batch {
    var batch = takeNested()
    batch.route = takeRoute(if: mayRoute)
    return batch
  }

  /// The oldest waiting route, if `allowed` and there is one.
  mutating func takeRoute(if allowed: Bool) -> Route? {
    guard allowed else { return nil }
    return routes.popFirst()
  }

  /// Events and progress only (for a nested drain, or a drainer that may not route now).
  mutating func takeNested() -> Batch {
    var batch = Batch()
    if !events.isEmpty {
      batch.events = events
      events = []
    }
    batch.publishProgress = progressChanged
    progressChanged = false
    return batch
  }

  /// The drainer found nothing left: nobody drains any more.
  mutating func release() {
    drainer = .idle
  }

  func hasWork(mayRoute: Bool) -> Bool {
    !events.isEmpty || progressChanged || (mayRoute && hasRoutes)
  }
}

// MARK: - Draining a job's outbox

/// Draining the ``Outbox``: who drains, and what the drainer takes next. The drainer performs
/// each batch after the lock, in this order: events, progress, then one piece of work (one
/// finished task to route, a group callback, `allTasksFinished()`, or the finish).
extension JobState {
  /// One batch for the drainer.
  struct Drain {
    var item = Item.none
    /// Events, progress, producers to wake and released dependants, if any (boxed: most
    /// batches have none, and stay small).
    var deliveries: Deliveries?

    /// Events to stamp and yield (and the streams to end, once the job finished).
    var events: JobEventListeners.Delivery? { deliveries?.events }
    /// Counts to write to the published progress.
    var progress: (progress: Progress, total: Int64, completed: Int64)? { deliveries?.progress }
    /// Tasks that wait for their dependencies no more: the drainer queues or skips them first.
    var exits: [TaskExit] { deliveries?.exits ?? [] }

    enum Item {
      case none
      /// Route this finished task (its per-task callback, then its group's), with the decision
      /// for its callback if it was taken with the task (see ``JobState/decideFromReport(_:)``).
      case route(TaskNode, RoutingDecision?)
      case step(Step)
    }
  }

  /// After a transition on `thread`: whether it drains now, and how (see ``Outbox/claim``).
  /// `inTrack`: asked by a `track` call, which is where `main()`'s thread routes while it runs.
  mutating func claimDrain(on thread: UInt, inTrack: Bool = false) -> Outbox<TaskNode, PendingJobEvent>.Role {
    // A thread drains already (usually this one, a door inside a callback): whether this thread
    // may route, and whether a step is due, do not matter then.
    guard case .idle = outbox.drainer else { return outbox.claim(by: thread, mayRoute: false) }
    let routes = phase.routes(for: thread, inTrack: inTrack)
    return outbox.claim(by: thread, mayRoute: routes, extra: hasStepDue)
  }

  /// When the job's door (`JobController.withJobState`) asks to drain after a transition.
  enum DrainClaim {
    /// With the transition's lock: the thread drains after it if nobody does and there is work
    /// it may do.
    case now
    /// As `now`, for a `track` call, where `main()`'s thread routes while `main()` runs.
    case inTrack
    /// Not now: the transition's actions end with a claim of their own once carried out (a
    /// stop's, after its tasks were cancelled, which may be later on the thread's stop
    /// trampoline: see `Trampoline`).
    case afterActions
  }

  /// What the job's state left to do once a transition's lock is released, taken by the door
  /// with that lock: the after-lock effects, and whether this thread drains, and how.
  struct AfterLock {
    var role: Outbox<TaskNode, PendingJobEvent>.Role
    /// Refills to schedule and producers to wake (usually `nil`).
    var effects: AfterLockEffects?
  }

  /// The after-lock effects left to do after the lock (usually none: `nil`), taken once.
  mutating func takeAfterLockEffects() -> AfterLockEffects? {
    guard !afterLockEffects.isEmpty else { return nil }
    return takeNonEmptyAfterLockEffects()
  }

  private mutating func takeNonEmptyAfterLockEffects() -> AfterLockEffects {
    exchange(&afterLockEffects, with: AfterLockEffects())
  }

  /// Takes, right after a transition on `thread`, what it left to do after the lock (see
  /// ``AfterLock``); the claim as `claim` says.
  mutating func afterTransition(_ claim: DrainClaim, on thread: UInt) -> AfterLock {
    let effects = takeAfterLockEffects()
    switch claim {
    case .now:
      return AfterLock(role: claimDrain(on: thread, inTrack: false), effects: effects)
    case .inTrack:
      return AfterLock(role: claimDrain(on: thread, inTrack: true), effects: effects)
    case .afterActions:
      return AfterLock(role: .none, effects: effects)
    }
  }

  /// For the drainer on `thread`: the next batch, or `nil` when nothing is left (the outbox then
  /// has no drainer). `routed`: the task whose per-task callback the drainer just called (or
  /// skipped): it is forgotten first, and its group's callback, if due, is the batch's work. A
  /// batch that finishes the job is the last one: the drainer is released with it.
  mutating func nextDrain(on thread: UInt, inTrack: Bool = false, routed: TaskNode? = nil) -> Drain? {
    var drain = Drain()
    let group = routed.map { self.routed($0) } ?? .none
    if case .none = group {
      takeWork(into: &drain, on: thread, inTrack: inTrack)
    } else {
      drain.item = .step(.group(group))
    }
    takeDeliveries(into: &drain, releasingDependants: true)
    switch drain.item {
    case .step(.finish):
      outbox.release()
    case .none where drain.deliveries == nil:
      outbox.release()
      return nil
    default:
      break
    }
    return drain
  }

  private mutating func takeWork(into drain: inout Drain, on thread: UInt, inTrack: Bool) {
    // A group that reached zero while `main()` ran comes first (as it would have come then):
    // routing a later task of the group first would fire it, and the deferred one again.
    if phase.hasMainReturned, !phase.isStopping, registry.hasDeferredGroups, let group = registry.nextDeferredGroup() {
      drain.item = .step(.group(groupCallback(for: group)))
    } else if let node = outbox.takeRoute(if: phase.routes(for: thread, inTrack: inTrack)) {
      drain.item = .route(node, decideFromReport(node))
    } else if phase.hasMainReturned {
      let step = nextStep()
      if case .none = step {} else { drain.item = .step(step) }
    }
  }

  /// For a nested drain (the drainer's own thread, inside a callback it runs): events and
  /// progress only.
  mutating func nestedDrain() -> Drain {
    var drain = Drain()
    takeDeliveries(into: &drain)
    return drain
  }

  /// `allTasksFinished()` returned on the drainer: the last batch if the job finishes now (the
  /// drainer is released with it), `nil` if it tracked something new (drain on).
  mutating func drainAfterAllTasksFinished() -> Drain? {
    guard let finish = allTasksFinishedReturned() else { return nil }
    var drain = Drain(item: .step(.finish(finish)))
    takeDeliveries(into: &drain)
    outbox.release()
    return drain
  }

  /// `releasingDependants`: also hand out the dependants routed tasks released (a drainer's own
  /// batch only: a nested drain runs inside a callback, and a finishing batch has none).
  private mutating func takeDeliveries(into drain: inout Drain, releasingDependants: Bool = false) {
    // Usually nothing (every routed task asks): then nothing is built.
    guard
      outbox.hasEvents || outbox.progressChanged || !afterLockEffects.isEmpty
        || (releasingDependants && admission.hasDependencyWaitEnds)
    else { return }
    let taken = outbox.takeNested()
    let events = taken.events.isEmpty ? nil : listeners.delivery(of: taken.events)
    let publication = taken.publishProgress ? progress.publication() : nil
    // Producers a routed task made room for (`setMaxQueuedTasks`): usually none.
    let effects = takeAfterLockEffects()
    // Dependants released by routed tasks (`trackAndQueue(_:after:)`): usually none.
    let exits = releasingDependants && admission.hasDependencyWaitEnds ? takeDependencyExits() : []
    if events != nil || publication != nil || effects != nil || !exits.isEmpty {
      drain.deliveries = Deliveries(events: events, progress: publication, effects: effects, exits: exits)
    }
  }
}

/// What a drainer's batch delivers besides its work: events, progress counts, and producers to
/// wake.
final class Deliveries {
  let events: JobEventListeners.Delivery?
  let progress: (progress: Progress, total: Int64, completed: Int64)?
  let effects: AfterLockEffects?
  /// Dependants released by routed tasks.
  let exits: [TaskExit]

  init(
    events: JobEventListeners.Delivery?, progress: (progress: Progress, total: Int64, completed: Int64)?,
    effects: AfterLockEffects? = nil, exits: [TaskExit] = []
  ) {
    self.events = events
    self.progress = progress
    self.effects = effects
    self.exits = exits
  }
}

/// What a job's transitions leave to do after the lock, besides queueing the admitted tasks,
/// in the order they left it: refill timers of rate-limited groups to schedule, producers
/// waiting for room to resume, and the job's reference to itself that it gave up. Empty, and
/// free, unless those are used: the job's door (`JobController.withJobState`) asks whether there
/// is any with two field tests, and a job that lets go of itself allocates nothing for it.
struct AfterLockEffects {
  enum Effect {
    /// Schedule the group's next refill on the job's clock.
    case refill(TaskTypeEntry)
    /// Resume a producer waiting for room: `true`, look again; `false`, the job finished.
    case wake(CheckedContinuation<Bool, Never>, room: Bool)
  }

  private(set) var effects: [Effect] = []
  /// The job's reference to itself (`JobKeeper`) that it gave up: released with these effects,
  /// after the lock and after they ran, so the job's `deinit` never runs under the lock.
  private var releasedJob: JobController?

  var isEmpty: Bool { effects.isEmpty && releasedJob == nil }

  mutating func refill(_ group: TaskTypeEntry) {
    effects.append(.refill(group))
  }

  mutating func wake(_ waiter: CheckedContinuation<Bool, Never>, room: Bool) {
    effects.append(.wake(waiter, room: room))
  }

  mutating func release(_ job: JobController?) {
    if let job {
      releasedJob = job
    }
  }
}
