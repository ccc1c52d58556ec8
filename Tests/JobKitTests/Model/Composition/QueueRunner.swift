import Foundation
import JobKit

/// A failure count reported by a `QueueRunner`: the failures its queue's `onDrained` reported.
struct QueueFailures: Error, Equatable {
  let count: Int
}

/// A queue node: a `ConcurrentOperation` that adds its children to a `CommandQueue` (the first
/// `pausedAdds` while the queue is paused, resumed from another thread as the others are added
/// with `resumeRacingAdds`, else after the last add)
/// and finishes once `drained()` returned after the last add. Its `cancel()` is `cancelAll()`.
final class QueueRunner: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `commands` is behind a lock; every other stored property is immutable.
  let plan: NodePlan
  let builder: CompositionBuilder
  let queue: CommandQueue
  /// The commands added so far (weakly), in the order `add` was called; the indices of those
  /// whose `add` returned; the failures reported.
  private let commands = ModelLocked((added: [WeakRef](), returned: Set<Int>(), failures: 0))

  init(plan: NodePlan, builder: CompositionBuilder) {
    self.plan = plan
    self.builder = builder
    guard case .queue(let sequential, _) = plan.kind else { preconditionFailure("not a queue") }
    queue = CommandQueue(mode: sequential ? .sequential : .concurrent)
    super.init()
    builder.log.madeQueue(queue, node: plan.id)
    let log = builder.log
    let node = plan.id
    queue.onDrained = { [commands] failures in
      log.drained(node, failures: failures.map(\.taskName))
      commands.withLock { $0.failures += failures.count }
    }
  }

  override func operationStart() {
    guard case .queue(_, let pausedAdds) = plan.kind else { return }
    let queue = queue
    let racing = builder.log.plan.features.contains(.resumeRacingAdds)
    if pausedAdds > 0 { queue.pause() }
    for (index, child) in plan.children.enumerated() {
      if index == pausedAdds && pausedAdds > 0 && racing { DispatchQueue.global().async { queue.resume() } }
      add(child)
    }
    if pausedAdds > 0 && (pausedAdds >= plan.children.count || !racing) {
      if racing { DispatchQueue.global().async { queue.resume() } } else { queue.resume() }
    }
    Task { await drainAll() }
  }

  override func operationCancelled() {
    queue.cancelAll()
    builder.log.handedDown(plan.id)
  }

  private func add(_ child: NodePlan) {
    let late: @Sendable () -> Void = { [weak self, plan] in
      for node in plan.late { self?.add(node) }
    }
    let command = builder.build(child, addLate: late)
    builder.log.added(child.id)
    let index = commands.withLock { state in
      state.added.append(WeakRef(command, "n\(child.id)"))
      return state.added.count - 1
    }
    queue.add(command)
    commands.withLock { _ = $0.returned.insert(index) }
    builder.log.addReturned(child.id)
  }

  /// Awaits `drained()` until no command was added meanwhile; checks that it returned only once
  /// every command added before the call finished.
  ///
  /// "Added before" means its `add` returned before `drained()` was called. A command whose
  /// `add` was still running (a late add from a leaf's thread) may be put in a burst made after
  /// `drained()` took its snapshot of the running bursts, and is then not waited for (issue 23,
  /// seeds 8737 and 3778: a `cancelAll()` storm closed the burst, the late add made a new one);
  /// such a command makes the loop call `drained()` again.
  private func drainAll() async {
    while true {
      let (before, covered) = commands.withLock { ($0.added.count, $0.returned) }
      await queue.drained()
      let (unfinished, count) = commands.withLock { state in
        (covered.sorted().compactMap { state.added[$0].unfinishedLabel }, state.added.count)
      }
      if !unfinished.isEmpty {
        builder.log.violation("n\(plan.id): drained() returned while commands \(unfinished) had not finished")
      }
      if count == before && covered.count == before { break }
    }
    let failures = commands.withLock { $0.failures }
    operationDone(error: failures > 0 ? QueueFailures(count: failures) : nil)
  }
}
