import Foundation

/// Draining the ``Outbox``: who drains, and what the drainer takes next. The drainer performs
/// each batch after the lock, in this order: events, progress, then one piece of work (one
/// finished task to route, a group callback, `allTasksFinished()`, or the finish).
extension JobState {
  /// One batch for the drainer.
  struct Drain {
    var item = Item.none
    /// Events and progress, if any (boxed: most batches have none, and stay small).
    var deliveries: Deliveries?

    /// Events to stamp and yield (and the streams to end, once the job finished).
    var events: JobEventListeners.Delivery? { deliveries?.events }
    /// Counts to write to the published progress.
    var progress: (progress: Progress, total: Int64, completed: Int64)? { deliveries?.progress }

    enum Item {
      case none
      /// Route this finished task (its per-task callback, then its group's), with the decision
      /// for its callback if it was taken with the task (see ``JobState/decideFromReport(_:)``).
      case route(TrackedTask, RoutingDecision?)
      case step(Step)
    }
  }

  /// After a transition on `thread`: whether it drains now, and how (see ``Outbox/claim``).
  /// `inTrack`: asked by a `track` call, which is where `main()`'s thread routes while it runs.
  mutating func claimDrain(on thread: UInt, inTrack: Bool = false) -> Outbox<TrackedTask, PendingJobEvent>.Role {
    let routes = phase.routes(for: thread, inTrack: inTrack)
    return outbox.claim(by: thread, routes: routes ? .some : .none, extra: hasStepDue)
  }

  /// For the drainer on `thread`: the next batch, or `nil` when nothing is left (the outbox then
  /// has no drainer). `routed`: the task whose per-task callback the drainer just delivered (or
  /// skipped): it is forgotten first, and its group's callback, if due, is the batch's work. A
  /// batch that finishes the job is the last one: the drainer is released with it.
  mutating func nextDrain(on thread: UInt, inTrack: Bool = false, routed: TrackedTask? = nil) -> Drain? {
    var drain = Drain()
    let group = routed.map { self.routed($0) } ?? .none
    if case .none = group {
      takeWork(into: &drain, on: thread, inTrack: inTrack)
    } else {
      drain.item = .step(.group(group))
    }
    takeDeliveries(into: &drain)
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
    if phase.runsSteps, !phase.isStopping, let group = registry.nextDeferredGroup() {
      drain.item = .step(.group(groupCallback(for: group)))
    } else if let node = outbox.takeRoute(if: phase.routes(for: thread, inTrack: inTrack)) {
      drain.item = .route(node, decideFromReport(node))
    } else if phase.runsSteps {
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

  private mutating func takeDeliveries(into drain: inout Drain) {
    let taken = outbox.takeNested()
    let events = taken.events.isEmpty ? nil : listeners.delivery(of: taken.events)
    let publication = taken.publishProgress ? progress.publication() : nil
    if events != nil || publication != nil {
      drain.deliveries = Deliveries(events: events, progress: publication)
    }
  }
}

/// What a drainer's batch delivers besides its work: events and progress counts.
final class Deliveries {
  let events: JobEventListeners.Delivery?
  let progress: (progress: Progress, total: Int64, completed: Int64)?

  init(events: JobEventListeners.Delivery?, progress: (progress: Progress, total: Int64, completed: Int64)?) {
    self.events = events
    self.progress = progress
  }
}
