import Foundation
import JobKit

/// The event a dispatch node dispatches.
struct CompositionEvent: Sendable {
  let node: Int
}

/// A dispatch node: a `ConcurrentOperation` whose start dispatches an event on a `CommandMap`
/// mapping each child (in order) to a command, and which finishes with the dispatch's error once
/// the dispatch finished. Its `cancel()` cancels the dispatch.
final class DispatchRunner: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `dispatch` is behind a lock; every other stored property is immutable.
  let plan: NodePlan
  let map: CommandMap
  private let dispatch = ModelLocked<CommandDispatch?>(nil)
  private let log: CompositionLog

  init(plan: NodePlan, builder: CompositionBuilder, concurrent: Bool) {
    self.plan = plan
    log = builder.log
    map = CommandMap(concurrent: concurrent)
    super.init()
    log.watch(map, "CommandMap of n\(plan.id)")
    let log = log
    for child in plan.children {
      map.map(CompositionEvent.self) { _ in
        let command = builder.build(child)
        log.added(child.id)
        return command
      }
    }
  }

  override func operationStart() {
    let dispatched = map.dispatch(CompositionEvent(node: plan.id))
    QuietMisuse.silence(dispatched)
    log.madeDispatch(dispatched, node: plan.id)
    dispatch.withLock { $0 = dispatched }
    Task {
      try? await dispatched.waitForFinish()
      self.dispatch.withLock { $0 = nil }
      self.operationDone(error: dispatched.error)
    }
  }

  /// Cancels the dispatch with this runner's reason, as a job hands its reason down. Runs after
  /// `operationStart()` returned (a cancel that arrives meanwhile waits for it), so the dispatch
  /// may start commands after this runner's own cancel returned: the log records when the stop
  /// reached the dispatch.
  override func operationCancelled() {
    dispatch.withLock { $0 }?.cancel(reason: cancellationReason ?? CancellationError())
    log.handedDown(plan.id)
  }
}
