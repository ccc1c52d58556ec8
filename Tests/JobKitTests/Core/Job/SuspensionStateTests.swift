import Foundation
import Testing

@testable import JobKit

/// The suspension transitions of `OperationState` and `JobState` (issue 20, item 2), fed events
/// one by one on one thread. Modelled on CompositeOperations' `COOperation_Suspending_Tests`
/// (`test_suspend_whenNotRunning`) and its composite suspend specs.
@Suite("Suspension state machines")
struct SuspensionStateTests {
  private final class Alpha: BlockOperation, @unchecked Sendable {}
  private final class Child: ConcurrentOperation, @unchecked Sendable {}

  // MARK: OperationState

  /// `test_suspend_whenNotRunning`: suspend and resume an operation its queue has not started.
  @Test func suspendAndResumeBeforeTheStartChangeOnlyTheFlag() {
    var state = OperationState()
    let suspended = state.suspend()
    #expect(suspended == .init(isSuspended: true, generation: 1))
    #expect(state.suspend() == nil)  // idempotent
    guard case .resumed(let change, let runsStart, _, _) = state.resume() else {
      Issue.record("resume changed nothing")
      return
    }
    #expect(change == .init(isSuspended: false, generation: 2) && !runsStart)
    guard case .none = state.resume() else {
      Issue.record("a resume without a suspend changed something")
      return
    }
    guard case .run = state.start() else {
      Issue.record("a resumed operation did not start")
      return
    }
  }

  @Test func aSuspendedOperationStartedByItsQueueWaitsForTheResume() {
    var state = OperationState()
    _ = state.suspend()
    guard case .deferred = state.start() else {
      Issue.record("the start was not deferred")
      return
    }
    #expect(state.isExecuting && !state.isFinished)
    guard case .alreadyStarted = state.start() else {
      Issue.record("a second start was accepted")
      return
    }
    guard case .resumed(_, let runsStart, _, _) = state.resume() else {
      Issue.record("resume changed nothing")
      return
    }
    #expect(runsStart && state.phase == .starting(cancelPending: false))
  }

  @Test func aCancelFinishesADeferredStartAndEndsTheSuspension() {
    var state = OperationState()
    _ = state.suspend()
    _ = state.start()
    guard case .finishDeferred = state.cancel() else {
      Issue.record("a cancel left the deferred start waiting")
      return
    }
    #expect(!state.suspension.isSuspended && state.phase == .starting(cancelPending: false))
    guard case .none = state.resume() else {
      Issue.record("a resume after the cancel ran the start")
      return
    }
  }

  @Test(arguments: [false, true])
  func suspendDoesNothingOnAFinishedOrCancelledOperation(cancelled: Bool) {
    var state = OperationState()
    if cancelled {
      _ = state.cancel()
    } else {
      _ = state.start()
      _ = state.operationStartReturned()
      _ = state.finish(error: nil)
    }
    #expect(state.suspend() == nil && !state.suspension.isSuspended)
  }

  /// A stop without a cancel (a job's `fail(_:)`) ends a suspension as a cancel does: a later
  /// `suspend()` changes nothing, and a start that waited runs (the job then finds itself stopped).
  @Test func aStopEndsTheSuspensionAndALaterSuspendIsANoOp() {
    var state = OperationState()
    _ = state.suspend()
    guard case .deferred = state.start() else {
      Issue.record("a suspended start did not wait")
      return
    }
    guard case .resumed(let change, runsStart: true, _, _) = state.endSuspensionForStop() else {
      Issue.record("a stop left the deferred start waiting")
      return
    }
    #expect(change == .init(isSuspended: false, generation: 2))
    #expect(state.suspend() == nil && !state.suspension.isSuspended)
    var idle = OperationState()
    guard case .none = idle.endSuspensionForStop() else {
      Issue.record("a stop of an operation that was not suspended changed something")
      return
    }
    #expect(idle.suspend() == nil)
    guard case .run = idle.start() else {
      Issue.record("a stopped operation's start waited for a resume")
      return
    }
  }

  /// Cancelled from `cancel()`'s first step (`recordCancel`, before its transition and before
  /// Foundation's own `cancel()`): the start skips the work, whether suspended or not.
  @Test(arguments: [false, true]) func aStartAfterACancelsFirstStepSkipsTheWork(suspended: Bool) {
    var state = OperationState()
    if suspended {
      _ = state.suspend()
    }
    _ = state.recordCancel()
    guard case .skipCancelled = state.start() else {
      Issue.record("a cancelled start ran the work or waited for a resume")
      return
    }
  }

  // MARK: JobState

  private let job = JobController()

  private func started() -> JobState {
    var state = JobState()
    _ = state.beginMain(on: 1)
    return state
  }

  /// Tracks `task` for the job to queue on `queue`, as `JobController.track` does: the
  /// transition, then `admitOrWait` if it waits. Returns the node and whether it is queued now.
  private func track(_ task: Operation, in state: inout JobState, queue: OperationQueue) -> (TaskNode, Bool) {
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue)
    guard case .tracked(let node, _, let queueNow, let waits, _, _) = outcome else {
      Issue.record("not tracked")
      return (TaskNode(job: job, task: task, group: TaskTypeEntry(type: type(of: task))), false)
    }
    return (node, queueNow || (waits && state.admitOrWait(node, queue: queue)))
  }

  private func ids(_ admitted: [TaskExit]) -> [ObjectIdentifier] {
    admitted.map { ObjectIdentifier($0.task) }
  }

  @Test func tasksTrackedWhileSuspendedWaitAndAResumeQueuesThemInOrder() {
    var state = started()
    let queue = OperationQueue()
    let (_, before) = track(Alpha(), in: &state, queue: queue)
    #expect(before)
    _ = state.setSuspended(true, generation: 1)
    let tasks = [Alpha(), Alpha(), Alpha()]
    for task in tasks {
      let (_, queued) = track(task, in: &state, queue: queue)
      #expect(!queued)
    }
    #expect(state.admission.waitingForResume == 3)
    // Each held-back task's own state says so, with the queue it goes to.
    let held = state.registry.nodes.filter { node in
      guard case .unfinished(.waitingForResume(let heldFor), _) = node.state else { return false }
      return heldFor === queue
    }
    #expect(Set(held.map { ObjectIdentifier($0.operation) }) == Set(tasks.map(ObjectIdentifier.init)))
    let resumed = state.setSuspended(false, generation: 2)
    #expect(ids(resumed.exits) == tasks.map(ObjectIdentifier.init))
    #expect(state.admission.waitingForResume == 0)
    let released = state.registry.nodes.allSatisfy { node in
      if case .unfinished(.none, _) = node.state { return true }
      return false
    }
    #expect(released)
  }

  @Test func aStaleChangeIsDropped() {
    var state = started()
    _ = state.setSuspended(false, generation: 2)
    let stale = state.setSuspended(true, generation: 1)
    #expect(!state.suspension.isSuspended && stale.exits.isEmpty && !stale.tellsChildren)
  }

  @Test func limitsHoldAfterTheResumeAndTheLineKeepsItsOrder() {
    var state = started()
    let queue = OperationQueue()
    _ = state.setLimit(1, for: Alpha.self)
    let (holder, holderQueued) = track(Alpha(), in: &state, queue: queue)
    let (_, lineQueued) = track(Alpha(), in: &state, queue: queue)  // waits for a slot
    let inLine = state.admission.waitingForSlot(of: state.registry.group(for: Alpha.self))
    #expect(holderQueued && !lineQueued && inLine == 1)
    _ = state.setSuspended(true, generation: 1)
    let (_, heldQueued) = track(Alpha(), in: &state, queue: queue)  // waits for the resume
    #expect(!heldQueued)
    // The holder finishes while suspended: its slot is not given to the line.
    let freed = state.recordFinish(holder)
    #expect(freed?.exits.isEmpty ?? true)
    let resumed = state.setSuspended(false, generation: 2)
    // One slot: the task that waited in line first; the held-back one joins the line.
    let group = state.registry.group(for: Alpha.self)
    #expect(resumed.exits.count == 1 && group.running == 1 && state.admission.waitingForSlot(of: group) == 1)
  }

  private final class Tagged<Tag>: BlockOperation, @unchecked Sendable {}
  private enum T0 {}
  private enum T1 {}
  private enum T2 {}
  private enum T3 {}
  private enum T4 {}
  private enum T5 {}
  private enum T6 {}
  private enum T7 {}

  /// Tasks of several limited groups whose slots were freed while the job was suspended go,
  /// at the resume, in the order the job tracked them, whatever the order of their groups.
  @Test func aResumeLetsSeveralGroupsLinesGoInTrackingOrder() {
    var state = started()
    let queue = OperationQueue()
    let makers: [() -> Operation] = [
      { Tagged<T0>() }, { Tagged<T1>() }, { Tagged<T2>() }, { Tagged<T3>() },
      { Tagged<T4>() }, { Tagged<T5>() }, { Tagged<T6>() }, { Tagged<T7>() },
    ]
    var holders: [TaskNode] = []
    for make in makers {
      let task = make()
      _ = state.setLimit(1, for: type(of: task))
      let (holder, queued) = track(task, in: &state, queue: queue)
      #expect(queued)
      holders.append(holder)
    }
    // One task per group waits for its slot, tracked in an order of the groups' own.
    var waiting: [Operation] = []
    for index in [5, 2, 7, 0, 3, 6, 1, 4] {
      let task = makers[index]()
      let (_, queued) = track(task, in: &state, queue: queue)
      #expect(!queued)
      waiting.append(task)
    }
    _ = state.setSuspended(true, generation: 1)
    for holder in holders {
      #expect(state.recordFinish(holder)?.exits.isEmpty ?? true)
    }
    let resumed = state.setSuspended(false, generation: 2)
    #expect(ids(resumed.exits) == waiting.map(ObjectIdentifier.init))
  }

  @Test func aStopEndsTheSuspensionAndLetsTheHeldTasksGoAfterTheirCancel() {
    var state = started()
    let queue = OperationQueue()
    _ = state.setSuspended(true, generation: 1)
    let held = Alpha()
    _ = track(held, in: &state, queue: queue)
    let stop = state.stop(.cancelled(reason: nil))
    #expect(stop.cancel.map(ObjectIdentifier.init) == [ObjectIdentifier(held)])
    #expect(ids(stop.exits) == [ObjectIdentifier(held)] && !state.suspension.isSuspended)
    // A suspend of a stopping job changes nothing; later tasks are not held back.
    _ = state.setSuspended(true, generation: 2)
    #expect(!state.suspension.isSuspended)
    let (_, queued) = track(Alpha(), in: &state, queue: queue)
    #expect(queued)
  }

  @Test func theChildrenAreToldTheLatestStateByOneDeliverer() {
    var state = started()
    let queue = OperationQueue()
    let children = [Child(), Child()]
    for child in children {
      _ = track(child, in: &state, queue: queue)
    }
    let suspend = state.setSuspended(true, generation: 1)
    #expect(suspend.tellsChildren)
    // A resume and a suspend again arrive while the deliverer works: no second deliverer.
    let resume = state.setSuspended(false, generation: 2)
    let again = state.setSuspended(true, generation: 3)
    #expect(!resume.tellsChildren && !again.tellsChildren)
    guard let delivery = state.nextNoticeToChildren() else {
      Issue.record("nothing to deliver")
      return
    }
    #expect(delivery.suspend && delivery.children.map(ObjectIdentifier.init) == children.map(ObjectIdentifier.init))
    #expect(state.nextNoticeToChildren() == nil && !state.suspension.isTellingChildren)
    // A resume now makes a new deliverer, which tells the resume.
    let last = state.setSuspended(false, generation: 4)
    #expect(last.tellsChildren && state.nextNoticeToChildren()?.suspend == false)
  }
}
