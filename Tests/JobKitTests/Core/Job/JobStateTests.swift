import Foundation
import Testing

@testable import JobKit

/// `JobState` and `TaskRegistry` fed events one by one on one thread: what each transition
/// returns is what the job's face would do next. Nothing here starts a queue or a thread.
@Suite("JobState transitions")
struct JobStateTests {
  private final class Alpha: BlockOperation, @unchecked Sendable {}
  private final class Beta: BlockOperation, @unchecked Sendable {}

  /// A job whose state the tests drive directly (never started).
  private let job = JobController()

  private func track(_ task: Operation, in state: inout JobState, queue: OperationQueue? = nil) -> TaskNode {
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue)
    guard case .tracked(let node, _, _, _, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return TaskNode(job: job, task: task, group: TaskTypeEntry(type: type(of: task)))
    }
    return node
  }

  private func started() -> JobState {
    var state = JobState()
    _ = state.beginMain(on: 1)
    return state
  }

  /// The drainer's next batch's work on `thread`, as text (`nil`: nothing left, drainer released).
  private func next(_ state: inout JobState, on thread: UInt, inTrack: Bool = false) -> String? {
    guard let drain = state.nextDrain(on: thread, inTrack: inTrack) else { return nil }
    switch drain.item {
    case .none: return "none"
    case .route(let node, _): return "route \(type(of: node.operation))"
    case .step(.none): return "step none"
    case .step(.group(.taskGroupFinished(let group))): return "group \(group)"
    case .step(.group): return "group handler"
    case .step(.allTasksFinished): return "all"
    case .step(.finish(let finish)): return finish.error == nil ? "finish" : "finish failed"
    }
  }

  @Test func aTaskIsRoutedThenItsGroupThenAllTasksFinishedThenTheJobFinishes() {
    var state = started()
    let alpha = track(Alpha(), in: &state)
    let beta = track(Beta(), in: &state)
    let check1 = state.registry.count == 2
    #expect(check1)
    _ = state.recordFinish(alpha)
    let check201 = state.claimDrain(on: 2) == .none && state.claimDrain(on: 1) == .none  // main() runs
    #expect(check201)
    let check202 = state.claimDrain(on: 1, inTrack: true) == .drainer  // one of main's track calls
    #expect(check202)
    let check203 = next(&state, on: 1, inTrack: true) == "route Alpha"
    #expect(check203)
    let check2 = state.beginRouting(alpha, failure: nil, isCancelled: false, name: nil).isCall
    #expect(check2)
    guard case .none = state.routed(alpha) else {
      Issue.record("a group callback while main() runs")
      return
    }
    let check204 = next(&state, on: 1, inTrack: true) == nil
    #expect(check204)
    state.mainReturned()
    let check205 = state.claimDrain(on: 1) == .drainer  // the deferred group is due
    #expect(check205)
    let check206 = next(&state, on: 1) == "group \(Alpha.self)"
    #expect(check206)
    let check207 = next(&state, on: 1) == nil  // beta is unfinished
    #expect(check207)
    _ = state.recordFinish(beta)
    let check208 = state.claimDrain(on: 3) == .drainer  // nobody drains: this thread does
    #expect(check208)
    let check209 = state.claimDrain(on: 4) == .none
    #expect(check209)
    let check210 = next(&state, on: 3) == "route Beta"
    #expect(check210)
    guard case .taskGroupFinished(let group) = state.routed(beta) else {
      Issue.record("no group")
      return
    }
    #expect(group == Beta.self)
    let check211 = next(&state, on: 3) == "all"
    #expect(check211)
    guard let last = state.drainAfterAllTasksFinished(), case .step(.finish(let finish)) = last.item else {
      Issue.record("no finish")
      return
    }
    #expect(finish.error == nil)
    let check3 = state.phase.isFinished && state.outbox.drainer == .idle
    #expect(check3)
    let late = Alpha()
    guard case .jobFinished = state.track(late, node: TaskNode(job: job, task: late), queue: nil) else {
      Issue.record("tracked after the finish")
      return
    }
  }

  /// A node is made with no lock held and without its group; the `track` transition gives it
  /// the entry of its task's exact class, one per class, and counts the task in it.
  @Test func trackingGivesTheNodeItsClasssGroup() {
    var state = started()
    let task = Alpha()
    let unpublished = TaskNode(job: job, task: task)
    #expect(unpublished.typeEntry == nil)
    guard case .tracked(let first, _, _, _, _, _) = state.track(task, node: unpublished, queue: nil) else {
      Issue.record("not tracked")
      return
    }
    #expect(first === unpublished)
    let second = track(Alpha(), in: &state)
    let other = track(Beta(), in: &state)
    #expect(first.typeEntry === second.typeEntry)
    #expect(first.typeEntry !== other.typeEntry)
    #expect(first.typeEntry.type == Alpha.self && other.typeEntry.type == Beta.self)
    #expect(first.typeEntry.unfinished == 2 && other.typeEntry.unfinished == 1)
  }

  @Test func aGroupThatReachesZeroWhileMainRunsFiresOnceAfterMainIfStillAtZero() {
    var state = started()
    let first = track(Alpha(), in: &state)
    _ = state.recordFinish(first)
    let check4 = state.claimDrain(on: 1, inTrack: true) == .drainer
    #expect(check4)
    let check41 = next(&state, on: 1, inTrack: true) == "route Alpha"
    #expect(check41)
    guard case .none = state.routed(first) else {
      Issue.record("a group fired while main ran")
      return
    }
    let check5 = next(&state, on: 1, inTrack: true) == nil
    #expect(check5)
    state.mainReturned()
    guard case .group(.taskGroupFinished) = state.nextStep() else {
      Issue.record("deferred group lost")
      return
    }
    guard case .allTasksFinished = state.nextStep() else {
      Issue.record("expected all")
      return
    }
  }

  /// The finishing thread reports what routing needs: the drainer that takes the task decides
  /// its callback in the same step (a failure is recorded then); a timed-out task whose
  /// `isCancelled` was not read is left to the router.
  @Test func aReportedFinishIsDecidedAsItIsTaken() {
    var state = started()
    state.mainReturned()
    let failed = track(Alpha(), in: &state)
    _ = state.recordFinish(failed, report: FinishReport(error: TestError(3), isCancelled: false))
    let check40 = state.claimDrain(on: 2) == .drainer
    #expect(check40)
    guard case .route(let node, .call?)? = state.nextDrain(on: 2)?.item, node === failed else {
      Issue.record("expected the reported task, decided")
      return
    }
    let check41 = state.failures.map { $0.error as? TestError } == [TestError(3)]
    #expect(check41)
    let timedOut = track(Beta(), in: &state)
    let check42 = state.armTimeout(for: timedOut) && state.timeoutExpired(for: timedOut) != nil
    #expect(check42)
    _ = state.recordFinish(timedOut, report: FinishReport())
    _ = state.routed(failed)
    guard case .route(let late, nil)? = state.nextDrain(on: 2)?.item, late === timedOut else {
      Issue.record("expected the timed-out task, undecided")
      return
    }
  }

  @Test func aStopCancelsUnfinishedTasksRoutesAPendingRetryAndSkipsCallbacks() {
    var state = started()
    let running = track(Alpha(), in: &state)
    let retrying = track(Beta(), in: &state)
    let check6 = state.beginRetry(of: retrying)?.exits.isEmpty == true
    #expect(check6)
    let actions = state.stop(.cancelled(reason: nil))
    #expect(actions.cancel.map(ObjectIdentifier.init) == [ObjectIdentifier(running.operation)])
    let check203 = state.outbox.routeCount == 1  // the failed attempt is its task's last one
    #expect(check203)
    let check7 = state.beginRouting(retrying, failure: nil, isCancelled: false, name: nil).isSkip
    #expect(check7)
    let check101 = state.stop(.failed(TestError())).cancel.isEmpty  // the first reason won
    #expect(check101)
  }

  @Test func aLimitAdmitsInTrackingOrderAndAFinishedOrRetriedTaskGivesItsSlotBack() {
    var state = started()
    _ = state.setLimit(1, for: Alpha.self)
    let queue = OperationQueue()
    let nodes = (0..<3).map { _ in track(Alpha(), in: &state, queue: queue) }
    let check8 = state.admitOrWait(nodes[0], queue: queue)
    #expect(check8)
    let check102 = !state.admitOrWait(nodes[1], queue: queue)
    #expect(check102)
    let check103 = !state.admitOrWait(nodes[2], queue: queue)
    #expect(check103)
    // nodes[0]'s attempt fails and waits for a retry: its slot goes to nodes[1].
    let check9 =
      state.beginRetry(of: nodes[0]).map { $0.exits.map { ObjectIdentifier($0.task) } } == [
        ObjectIdentifier(nodes[1].operation)
      ]
    #expect(check9)
    let admitted = state.recordFinish(nodes[1])?.exits ?? []
    let check10 = admitted.map { ObjectIdentifier($0.task) } == [ObjectIdentifier(nodes[2].operation)]
    #expect(check10)
    let check11 = state.registry.group(for: Alpha.self).running == 1
    #expect(check11)
  }

  @Test func aTimeoutIsArmedScheduledAndDisarmedByTheFinish() {
    struct NoTimer: JobTimer { func cancel() {} }
    var state = started()
    let node = track(Alpha(), in: &state)
    let check12 = state.armTimeout(for: node)
    #expect(check12)
    let check13 = state.timeoutScheduled(NoTimer(), for: node)
    #expect(check13)
    let check14 = state.armedTask(of: node) === node.operation
    #expect(check14)
    let check15 = state.recordFinish(node)?.timeout != nil
    #expect(check15)
    let check16 = state.armedTask(of: node) == nil
    #expect(check16)
    let check17 = state.timeoutExpired(for: node) == nil
    #expect(check17)
    let check104 = !state.timedOut(node)
    #expect(check104)
  }

  /// The attempt failed, and its retry began, before its timeout was armed (the caller arms it
  /// after `track` returns): no timer is armed for it.
  @Test func anAttemptThatFailedBeforeItsTimeoutWasArmedGetsNone() {
    var state = started()
    let node = track(Alpha(), in: &state)
    let retrying = state.beginRetry(of: node) != nil
    #expect(retrying)
    let armed = state.armTimeout(for: node)
    #expect(!armed)
  }

  @Test func anExpiredTimeoutMarksTheTaskTimedOutOnce() {
    var state = started()
    let node = track(Alpha(), in: &state)
    let check18 = state.armTimeout(for: node)
    #expect(check18)
    let check19 = state.timeoutExpired(for: node)?.task === node.operation
    #expect(check19)
    let check20 = state.timeoutExpired(for: node) == nil
    #expect(check20)
    let check21 = state.timedOut(node)
    #expect(check21)
  }

  @Test func aDuplicateIsForgottenWithoutTouchingItsGroupsOtherTasks() {
    var state = started()
    let task = Alpha()
    let first = track(task, in: &state)
    let second = track(task, in: &state)
    let check22 = state.registry.count == 2
    #expect(check22)
    state.untrackDuplicate(second)
    let check23 = state.registry.count == 1 && first.state.isRegistered && !second.state.isRegistered
    #expect(check23)
    let check24 = state.registry.group(for: Alpha.self).unfinished == 1
    #expect(check24)
  }

  @Test func theRegistryListsUnfinishedNodesAndUnlinksThemInAnyOrder() {
    var registry = TaskRegistry()
    let group = TaskTypeEntry(type: Alpha.self)
    let nodes = (0..<4).map { _ in TaskNode(job: job, task: Alpha(), group: group) }
    for node in nodes { registry.insert(node) }
    let check25 = registry.nodes.map(ObjectIdentifier.init) == nodes.reversed().map(ObjectIdentifier.init)
    #expect(check25)
    let check105 = !registry.remove(nodes[2])
    #expect(check105)
    let check204 = !registry.remove(nodes[2])  // twice is harmless
    #expect(check204)
    let check106 = !registry.remove(nodes[3])
    #expect(check106)
    let check107 = !registry.remove(nodes[0])
    #expect(check107)
    let check205 = registry.remove(nodes[1])  // the group's last
    #expect(check205)
    let check26 = registry.isEmpty && registry.nodes.map(ObjectIdentifier.init).isEmpty
    #expect(check26)
  }
}

extension JobState.RoutingDecision {
  fileprivate var isCall: Bool {
    if case .call = self { return true }
    return false
  }

  fileprivate var isSkip: Bool {
    if case .skip = self { return true }
    return false
  }
}
