import Foundation
import Testing

@testable import JobKit

/// `JobState` fed events one by one on one thread (issue 23): a limited group's slot rule across
/// a stop, and exactly one `taskFinished` event per observed task.
@Suite("JobState limits across a stop and finish events")
struct JobStateLimitsAndEventsTests {
  private final class Alpha: BlockOperation, @unchecked Sendable {}

  /// A job whose state the tests drive directly (never started).
  private let job = JobController()

  private struct Tracked {
    let node: TaskNode
    let cancel: Bool
    let queueNow: Bool
    let waitsForSlot: Bool
  }

  private func track(_ task: Operation, in state: inout JobState, queue: OperationQueue? = nil) -> Tracked {
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue)
    guard case .tracked(let node, let cancel, let queueNow, let waitsForSlot, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      let node = TaskNode(job: job, task: task, group: TaskTypeEntry(type: type(of: task)))
      return Tracked(node: node, cancel: false, queueNow: false, waitsForSlot: false)
    }
    return Tracked(node: node, cancel: cancel, queueNow: queueNow, waitsForSlot: waitsForSlot)
  }

  private func started() -> JobState {
    var state = JobState()
    _ = state.beginMain(on: 1)
    return state
  }

  private func ids(_ admitted: [TaskExit]) -> [ObjectIdentifier] {
    admitted.map { ObjectIdentifier($0.task) }
  }

  private func id(_ tracked: Tracked) -> ObjectIdentifier {
    ObjectIdentifier(tracked.node.operation)
  }

  // MARK: A slot is the only way into the queue, whatever the phase

  /// The sequence behind "a limit of 1 admits 2": `main()` tracks a task while the limit is
  /// reached; before the task asks for its slot (`admitOrWait`, once its finish is observed),
  /// another thread stops the job. The stop must not let it skip the line: it would be queued
  /// at once, and could start before the stopping thread cancels it, beside the slot's holder.
  @Test func aTaskTrackedAsTheJobStopsStillWaitsForASlot() {
    var state = started()
    _ = state.setLimit(1, for: Alpha.self)
    let queue = OperationQueue()
    let holder = track(Alpha(), in: &state, queue: queue)
    let holderAdmitted = state.admitOrWait(holder.node, queue: queue)
    #expect(holder.waitsForSlot && !holder.queueNow && holderAdmitted)
    let waiting = track(Alpha(), in: &state, queue: queue)
    let waitingAdmitted = state.admitOrWait(waiting.node, queue: queue)
    #expect(!waitingAdmitted)
    let racing = track(Alpha(), in: &state, queue: queue)  // its finish is not observed yet

    let stop = state.stop(.cancelled(reason: nil))
    // Every unfinished task is cancelled, the waiting one included; nothing is queued.
    #expect(Set(stop.cancel.map(ObjectIdentifier.init)) == [id(holder), id(waiting), id(racing)])
    let group = state.registry.group(for: Alpha.self)
    #expect(group.running == 1 && state.admission.waitingForSlot(of: group) == 1)

    let racingAdmitted = state.admitOrWait(racing.node, queue: queue)
    #expect(!racingAdmitted)  // before the fix: admitted without a slot
    // Tracked after the stop: cancelled at once, and it too waits for a slot.
    let late = track(Alpha(), in: &state, queue: queue)
    #expect(late.cancel && late.waitsForSlot && !late.queueNow)
    let lateAdmitted = state.admitOrWait(late.node, queue: queue)
    #expect(!lateAdmitted)
    #expect(group.running == 1 && state.admission.waitingForSlot(of: group) == 3)

    // The holder ignored the cancel and finishes now: one slot, one task, in tracking order.
    #expect(ids(state.recordFinish(holder.node)?.exits ?? []) == [id(waiting)])
    #expect(ids(state.recordFinish(waiting.node)?.exits ?? []) == [id(racing)])
    #expect(ids(state.recordFinish(racing.node)?.exits ?? []) == [id(late)])
    #expect(state.recordFinish(late.node)?.exits.isEmpty ?? true)
    #expect(group.running == 0 && state.admission.waitingForSlot(of: group) == 0)
  }

  /// Raising a limit while the job stops admits waiting tasks into the new slots, no more.
  @Test func raisingALimitWhileTheJobStopsAdmitsIntoTheNewSlotsOnly() {
    var state = started()
    _ = state.setLimit(1, for: Alpha.self)
    let queue = OperationQueue()
    let nodes = (0..<4).map { _ in track(Alpha(), in: &state, queue: queue) }
    let admitted = nodes.map { state.admitOrWait($0.node, queue: queue) }
    #expect(admitted == [true, false, false, false])
    _ = state.stop(.failed(TestError()))
    #expect(ids(state.setLimit(2, for: Alpha.self)) == [id(nodes[1])])
    #expect(state.registry.group(for: Alpha.self).running == 2)
  }

  // MARK: Exactly one taskFinished event per observed task

  private func listening() -> (JobState, AsyncStream<JobEvent>.Continuation) {
    var state = started()
    let (_, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    _ = state.addListener(continuation)
    return (state, continuation)
  }

  private func labels(_ state: inout JobState) -> [String] {
    state.outbox.takeNested().events.map { $0.stamped(.now).label }
  }

  /// A retried task is one task for events, as for routing: a stop that ends its retry delay
  /// routes the failed attempt as its last one, and that emits the task's one `taskFinished`,
  /// with the attempt's error.
  @Test func aRetryEndedByAStopReportsTheTaskAsItIsRouted() {
    var (state, continuation) = listening()
    let task = Alpha()
    task.name = "a"
    let attempt = track(task, in: &state).node
    _ = state.confirmTracked(attempt, name: "a", at: .now)
    let retry = state.beginRetry(of: attempt, at: .now)
    #expect(retry != nil)
    #expect(labels(&state) == ["tracked a"])
    state.mainReturned()
    let stop = state.stop(.cancelled(reason: nil))
    #expect(stop.cancel.isEmpty)
    guard state.outbox.routeCount == 1, state.outbox.takeRoute(if: true) === attempt else {
      Issue.record("the attempt whose retry the stop ended is not routed")
      return
    }
    let failure = TaskFailure(task: task, error: TestError(1))
    let decision = state.beginRouting(attempt, failure: failure, isCancelled: false, name: "a")
    guard case .skip = decision else {
      Issue.record("a callback after the stop")
      return
    }
    _ = state.routed(attempt)
    #expect(labels(&state) == ["failed a", "group Alpha"])  // before the fix: no `failed a`
    continuation.finish()
  }

  /// The next attempt replaces the failed one without a second `taskTracked`; the routed
  /// attempt emits the task's `taskFinished`.
  @Test func aRetriedTaskIsTrackedOnceAndFinishesOnce() {
    var (state, continuation) = listening()
    let first = track(Alpha(), in: &state).node
    _ = state.confirmTracked(first, name: "a", at: .now)
    _ = state.beginRetry(of: first, at: .now)
    let claimed = state.claimRetry(of: first) != nil
    #expect(claimed)
    let next = Alpha()
    let outcome = state.track(next, node: TaskNode(job: job, task: next), queue: nil, replacing: first)
    guard case .tracked(let second, _, _, _, _, _) = outcome else {
      Issue.record("the next attempt was not tracked")
      return
    }
    _ = state.confirmTracked(second, name: "a", at: .now)
    _ = state.confirmTracked(first, name: "a", at: .now)  // a late confirmation of the replaced one
    state.mainReturned()
    _ = state.recordFinish(second, at: .now)
    guard state.outbox.takeRoute(if: true) === second else {
      Issue.record("not routed")
      return
    }
    _ = state.beginRouting(second, failure: nil, isCancelled: false, name: "a")
    _ = state.routed(second)
    #expect(labels(&state) == ["tracked a", "finished a", "group Alpha"])
    continuation.finish()
  }

  /// A task whose finish is routed before the tracking thread confirmed it (it was already
  /// running elsewhere): its `taskTracked` goes out with its `taskFinished`, first, and the late
  /// confirmation adds nothing.
  @Test func aTaskRoutedBeforeItsTrackingWasConfirmedReportsTrackedThenFinished() {
    var (state, continuation) = listening()
    let node = track(Alpha(), in: &state).node
    state.mainReturned()
    _ = state.recordFinish(node, at: .now)
    guard state.outbox.takeRoute(if: true) === node else {
      Issue.record("not routed")
      return
    }
    _ = state.beginRouting(node, failure: nil, isCancelled: false, name: "x")
    _ = state.confirmTracked(node, name: "x", at: .now)
    state.taskStarted(node, name: "x", at: .now)
    _ = state.routed(node)
    _ = state.confirmTracked(node, name: "x", at: .now)
    #expect(labels(&state) == ["tracked x", "finished x", "group Alpha"])
    continuation.finish()
  }
}
