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

  private func track(_ task: Operation, in state: inout JobState, queue: OperationQueue? = nil) -> TrackedTask {
    let outcome = state.track(task, queue: queue) { TrackedTask(job: job, task: task, group: $0) }
    guard case .tracked(let node, _, _, _, _, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return TrackedTask(job: job, task: task, group: TaskGroupEntry(type: type(of: task)))
    }
    return node
  }

  private func started() -> JobState {
    var state = JobState()
    _ = state.beginMain(on: 1)
    return state
  }

  @Test func aTaskIsRoutedThenItsGroupThenAllTasksFinishedThenTheJobFinishes() {
    var state = started()
    let alpha = track(Alpha(), in: &state)
    let beta = track(Beta(), in: &state)
    let check1 = state.registry.count == 2
    #expect(check1)
    let check201 = state.taskFinished(alpha).route == false  // main() holds the router
    #expect(check201)
    state.mainReturned()
    guard case .route(let batch) = state.nextStep() else {
      Issue.record("expected a batch")
      return
    }
    #expect(batch.map(ObjectIdentifier.init) == [ObjectIdentifier(alpha)])
    let check2 = state.beginRouting(alpha, failure: nil, isCancelled: false, name: nil).isDeliver
    #expect(check2)
    guard case (.taskGroupFinished(let group), _) = state.routed(alpha) else {
      Issue.record("no group")
      return
    }
    #expect(group == Alpha.self)
    guard case .release = state.nextStep() else {
      Issue.record("expected release")
      return
    }
    let check202 = state.taskFinished(beta).route  // nobody routes: this thread takes the router
    #expect(check202)
    guard case .route = state.nextStep() else {
      Issue.record("expected a batch")
      return
    }
    _ = state.routed(beta)
    guard case .allTasksFinished = state.nextStep() else {
      Issue.record("expected all")
      return
    }
    guard case .finish(let finish)? = state.allTasksFinishedReturned() else {
      Issue.record("no finish")
      return
    }
    #expect(finish.error == nil)
    let check3 = state.phase.isFinished
    #expect(check3)
    guard
      case .jobFinished = state.track(
        Alpha(), queue: nil, makeNode: { TrackedTask(job: job, task: Alpha(), group: $0) })
    else {
      Issue.record("tracked after the finish")
      return
    }
  }

  @Test func aGroupThatReachesZeroWhileMainRunsFiresOnceAfterMainIfStillAtZero() {
    var state = started()
    let first = track(Alpha(), in: &state)
    _ = state.taskFinished(first)
    let check4 = state.beginRoutingInMain(on: 1).count == 1
    #expect(check4)
    guard case (.none, _) = state.routed(first) else {
      Issue.record("a group fired while main ran")
      return
    }
    let check5 = state.nextBatchInMain().isEmpty
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

  @Test func aStopCancelsUnfinishedTasksRoutesAPendingRetryAndSkipsCallbacks() {
    var state = started()
    let running = track(Alpha(), in: &state)
    let retrying = track(Beta(), in: &state)
    retrying.extras = TaskExtras()
    let check6 = state.beginRetry(of: retrying)?.admitted.isEmpty == true
    #expect(check6)
    let actions = state.stop(.cancelled)
    #expect(actions.cancel.map(ObjectIdentifier.init) == [ObjectIdentifier(running.operation)])
    let check203 = state.registry.finished.count == 1  // the failed attempt is its task's last one
    #expect(check203)
    let check7 = state.beginRouting(retrying, failure: nil, isCancelled: false, name: nil).isSkip
    #expect(check7)
    let check101 = !state.stop(.failed(TestError())).route
    #expect(check101)
  }

  @Test func aLimitAdmitsInTrackingOrderAndAFinishedOrRetriedTaskGivesItsSlotBack() {
    var state = started()
    _ = state.setLimit(1, for: Alpha.self)
    let queue = OperationQueue()
    let nodes = (0..<3).map { _ in track(Alpha(), in: &state, queue: queue) }
    #expect(nodes.allSatisfy { $0.extras?.pendingQueue === queue })
    let check8 = state.admitOrWait(nodes[0])
    #expect(check8)
    let check102 = !state.admitOrWait(nodes[1])
    #expect(check102)
    let check103 = !state.admitOrWait(nodes[2])
    #expect(check103)
    // nodes[0]'s attempt fails and waits for a retry: its slot goes to nodes[1].
    let check9 =
      state.beginRetry(of: nodes[0]).map { $0.admitted.map { ObjectIdentifier($0.task) } } == [
        ObjectIdentifier(nodes[1].operation)
      ]
    #expect(check9)
    let check10 =
      state.taskFinished(nodes[1]).admitted.map { ObjectIdentifier($0.task) } == [ObjectIdentifier(nodes[2].operation)]
    #expect(check10)
    let check11 = state.registry.group(for: Alpha.self).running == 1
    #expect(check11)
  }

  @Test func aTimeoutIsArmedScheduledAndDisarmedByTheFinish() {
    struct NoTimer: JobTimer { func cancel() {} }
    var state = started()
    let node = track(Alpha(), in: &state)
    node.extras = TaskExtras()
    let check12 = state.armTimeout(for: node)
    #expect(check12)
    let check13 = state.timeoutScheduled(NoTimer(), for: node)
    #expect(check13)
    let check14 = state.armedTask(of: node) === node.operation
    #expect(check14)
    let check15 = state.taskFinished(node).timeout != nil
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
    node.extras = TaskExtras()
    let retrying = state.beginRetry(of: node) != nil
    #expect(retrying)
    let armed = state.armTimeout(for: node)
    #expect(!armed)
  }

  @Test func anExpiredTimeoutMarksTheTaskTimedOutOnce() {
    var state = started()
    let node = track(Alpha(), in: &state)
    node.extras = TaskExtras()
    let check18 = state.armTimeout(for: node)
    #expect(check18)
    let check19 = state.timeoutExpired(for: node) === node.operation
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
    _ = state.untrackDuplicate(second)
    let check23 = state.registry.count == 1 && first.isRegistered && !second.isRegistered
    #expect(check23)
    let check24 = state.registry.group(for: Alpha.self).unfinished == 1
    #expect(check24)
  }

  @Test func aHoldKeepsAnEmptyJobFromFinishingUntilItIsReleased() {
    var state = started()
    let held = state.holdOpen()
    #expect(held)
    state.mainReturned()
    guard case .release = state.nextStep() else {
      Issue.record("a held job with nothing tracked must wait")
      return
    }
    let routes = state.releaseHold()  // the last hold, nothing tracked, nobody routes
    #expect(routes)
    guard case .allTasksFinished = state.nextStep() else {
      Issue.record("expected allTasksFinished once the hold was released")
      return
    }
    let again = state.holdOpen()  // taken inside allTasksFinished(): the job does not finish
    #expect(again)
    #expect(state.allTasksFinishedReturned() == nil)
    let releasedWhileRouting = state.releaseHold()  // this thread still holds the router
    #expect(!releasedWhileRouting)
    guard case .allTasksFinished = state.nextStep() else {
      Issue.record("expected allTasksFinished again")
      return
    }
    guard case .finish? = state.allTasksFinishedReturned() else {
      Issue.record("expected the finish")
      return
    }
    let afterFinish = state.holdOpen()
    #expect(!afterFinish)
  }

  @Test func theRegistryListsUnfinishedNodesAndUnlinksThemInAnyOrder() {
    var registry = TaskRegistry()
    let group = TaskGroupEntry(type: Alpha.self)
    let nodes = (0..<4).map { _ in TrackedTask(job: job, task: Alpha(), group: group) }
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
  fileprivate var isDeliver: Bool {
    if case .deliver = self { return true }
    return false
  }

  fileprivate var isSkip: Bool {
    if case .skip = self { return true }
    return false
  }
}
