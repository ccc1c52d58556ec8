import Foundation
import Testing

@testable import JobKit

/// `JobAdmission` and its `JobState` transitions fed one by one on one thread: which tasks
/// tracked for admission leave the line, when, and in which order. Nothing here starts a queue
/// or a thread. (Mutating calls stay out of `#expect`.)
@Suite("JobAdmission transitions")
struct JobAdmissionStateTests {
  private final class Limited: BlockOperation, @unchecked Sendable {}

  /// A job whose state the tests drive directly (never started).
  private let job = JobController()
  private let queue = OperationQueue()

  /// Tracks `task` for admission (as `trackForAdmission` does) and enters it in the line.
  private func add(_ task: Operation, to state: inout JobState) -> (TaskNode?, [TaskExit]) {
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue, waitsForAdmission: true)
    guard case .tracked(let node, _, let queueNow, let waitsForSlot, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return (nil, [])
    }
    #expect(!queueNow && !waitsForSlot)
    return (node, state.enterAdmission(node, queue: queue).map { [$0] } ?? [])
  }

  private func done(_ state: inout JobState, _ task: Operation) -> [TaskExit] {
    state.admissionDone(task).map { [$0] } ?? []
  }

  private func tasks(_ exits: [TaskExit]) -> [Operation] {
    exits.map(\.task)
  }

  private func state(_ order: JobAdmission.Order, blocked: Bool = false) -> JobState {
    var state = JobState()
    state.activateAdmission(order, blocked: blocked)
    return state
  }

  @Test(arguments: [JobAdmission.Order.all, .oneAtATime])
  func nothingLeavesBeforeTheAdmissionOpens(order: JobAdmission.Order) {
    var state = state(order)
    let added = (0..<3).map { _ in BlockOperation {} }
    for task in added {
      let (_, exits) = add(task, to: &state)
      #expect(exits.isEmpty)
    }
    #expect(state.tasksWaitingForAdmission.count == 3)
    let opened = state.openAdmission()
    let expected = order == .all ? added : [added[0]]
    #expect(tasks(opened).count == expected.count && zip(tasks(opened), expected).allSatisfy { $0 === $1 })
    #expect(opened.allSatisfy { $0.isQueuedAtOnce && $0.leftAdmissionLine })
  }

  /// Many tasks that may go at once leave in batches of `TaskExit.batchLimit`, in order, each batch asked
  /// for once the one before it was carried out.
  @Test func manyTasksLeaveInBatches() {
    var state = state(.all)
    let added = (0..<(TaskExit.batchLimit + 44)).map { _ in BlockOperation {} }
    for task in added {
      _ = add(task, to: &state)
    }
    let first = state.openAdmission()
    let second = state.admissionExitsFromLine()
    let third = state.admissionExitsFromLine()
    #expect(first.count == TaskExit.batchLimit && second.count == 44 && third.isEmpty)
    #expect(zip(tasks(first + second), added).allSatisfy { $0 === $1 })
    #expect(state.tasksWaitingForAdmission.isEmpty)
  }

  /// One at a time: the next leaves only once the one before it is done, in the order added;
  /// a task that is not the current one being done changes nothing.
  @Test func oneAtATimeGoesInOrder() {
    var state = state(.oneAtATime)
    let added = (0..<3).map { _ in BlockOperation {} }
    for task in added { _ = add(task, to: &state) }
    let first = state.openAdmission()
    #expect(tasks(first).first === added[0])
    let early = done(&state, added[1])
    #expect(early.isEmpty)
    let second = done(&state, added[0])
    #expect(tasks(second).count == 1 && tasks(second).first === added[1])
    let late = BlockOperation {}
    let (_, lateExits) = add(late, to: &state)
    #expect(lateExits.isEmpty)
    let third = done(&state, added[1])
    #expect(tasks(third).first === added[2])
    let fourth = done(&state, added[2])
    #expect(tasks(fourth).first === late)
    let fifth = done(&state, late)
    #expect(fifth.isEmpty && state.tasksWaitingForAdmission.isEmpty)
    // Idle now: the next task added leaves at once.
    let (_, idle) = add(BlockOperation {}, to: &state)
    #expect(idle.count == 1)
  }

  /// A pause holds every task in line; a stale change is dropped; the resume lets them go.
  @Test func aPauseHoldsTheLineAndAStaleResumeIsDropped() {
    var state = state(.all)
    _ = state.openAdmission()
    let paused = state.setAdmissionPaused(true, generation: 2)
    #expect(paused.isEmpty)
    let (_, exits) = add(BlockOperation {}, to: &state)
    #expect(exits.isEmpty)
    let stale = state.setAdmissionPaused(false, generation: 1)
    #expect(stale.isEmpty && state.tasksWaitingForAdmission.count == 1)
    let resumed = state.setAdmissionPaused(false, generation: 3)
    #expect(resumed.count == 1 && state.tasksWaitingForAdmission.isEmpty)
  }

  /// Blocked (a sequential group's source comes first) until unblocked.
  @Test func aBlockedAdmissionWaitsForTheUnblock() {
    var state = state(.oneAtATime, blocked: true)
    _ = add(BlockOperation {}, to: &state)
    let opened = state.openAdmission()
    #expect(opened.isEmpty)
    let unblocked = state.setAdmissionBlocked(false)
    #expect(unblocked.count == 1)
  }

  /// A stop lets the whole line go, cancelled, to be started after the cancels (before the
  /// admission opened, and whatever the order); a task entering while the job stops goes at once.
  @Test(arguments: [JobAdmission.Order.all, .oneAtATime])
  func aStopLetsTheLineGoCancelled(order: JobAdmission.Order) {
    var state = state(order)
    let added = (0..<3).map { _ in BlockOperation {} }
    for task in added { _ = add(task, to: &state) }
    let actions = state.stop(.cancelled(reason: nil))
    #expect(actions.cancel.count == 3 && actions.exits.count == 3 && actions.exits.allSatisfy(\.startsCancelled))
    #expect(zip(actions.exits.map(\.task), added).allSatisfy { $0 === $1 })
    #expect(state.tasksWaitingForAdmission.isEmpty)
    let (_, late) = add(BlockOperation {}, to: &state)
    #expect(late.count == 1)
  }

  /// A stop's exits come in one list, in the order they are carried out after the cancels: the
  /// tasks a suspension held back (queued) first, then the admission line's (started cancelled).
  @Test func aStopsExitsKeepTheirOrder() {
    var state = state(.all)
    let waiting = BlockOperation {}
    _ = add(waiting, to: &state)
    _ = state.setSuspended(true, generation: 1)
    let held = BlockOperation {}
    let outcome = state.track(held, node: TaskNode(job: job, task: held), queue: queue)
    guard case .tracked(let node, _, let queueNow, let waitsForSlot, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return
    }
    #expect(!queueNow && waitsForSlot && !state.admitOrWait(node, queue: queue))
    let actions = state.stop(.cancelled(reason: nil))
    #expect(actions.exits.map(\.task) == [held, waiting])
    #expect(actions.exits.map(\.isQueuedAtOnce) == [true, false])
    #expect(actions.exits.map(\.startsCancelled) == [false, true])
  }

  /// A task tracked before the stop but entering the line after it leaves at once, and its
  /// caller must cancel it before queueing it: the stop's own cancel of it comes from the
  /// stopping thread, maybe after the task started (a sequential group then ran two at once).
  @Test(arguments: [JobAdmission.Order.all, .oneAtATime])
  func aTaskThatEntersAfterTheStopIsCancelledFirst(order: JobAdmission.Order) {
    var state = state(order)
    _ = state.openAdmission()
    let task = BlockOperation {}
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue, waitsForAdmission: true)
    guard case .tracked(let node, let cancel, _, _, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return
    }
    #expect(!cancel)
    let actions = state.stop(.cancelled(reason: nil))
    #expect(actions.cancel.contains { $0 === task })
    let exit = state.enterAdmission(node, queue: queue)
    #expect(exit?.task === task && exit?.cancelsFirst == true)
    // Before the stop, nobody cancels it first.
    var running = self.state(order)
    _ = running.openAdmission()
    let (_, exits) = add(BlockOperation {}, to: &running)
    #expect(exits.count == 1 && exits.allSatisfy { !$0.cancelsFirst })
  }

  /// A task that leaves the line while the job is suspended, or whose group has a limit, is
  /// not queued at once: it asks for a slot (`askForSlots`), which holds it or admits it.
  @Test func aSuspendedJobsExitsAskForASlot() {
    var state = state(.all)
    _ = add(BlockOperation {}, to: &state)
    _ = state.setSuspended(true, generation: 1)
    let opened = state.openAdmission()
    #expect(opened.count == 1 && !opened[0].isQueuedAtOnce)
    let admitted = state.askForSlots(opened)
    #expect(admitted.isEmpty && state.admission.waitingForResume == 1)
    var limited = self.state(.all)
    _ = limited.setLimit(1, for: Limited.self)
    _ = add(Limited(), to: &limited)
    _ = add(Limited(), to: &limited)
    let exits = limited.openAdmission()
    #expect(exits.count == 2 && exits.allSatisfy { !$0.isQueuedAtOnce })
    let slots = limited.askForSlots(exits)
    #expect(slots.count == 1 && slots.allSatisfy(\.isQueuedAtOnce))
  }

  /// Tracked and not entered yet (its finish is being hooked): it counts as waiting already, so
  /// a snapshot never lists it as started beside the task whose turn it is.
  @Test func aTaskTrackedForAdmissionWaitsFromItsTrack() {
    var state = state(.all)
    _ = state.openAdmission()
    let task = BlockOperation {}
    let outcome = state.track(task, node: TaskNode(job: job, task: task), queue: queue, waitsForAdmission: true)
    guard case .tracked(let node, _, _, _, _, _) = outcome else {
      Issue.record("not tracked")
      return
    }
    #expect(state.tasksWaitingForAdmission.count == 1)
    let exit = state.enterAdmission(node, queue: queue)
    #expect(exit != nil && state.tasksWaitingForAdmission.isEmpty)
  }

  /// A task that finished while in line (someone else queued it: misuse) leaves the line with
  /// its finish, so the line never holds a routed task.
  @Test func aTaskFinishedInLineLeavesIt() {
    var state = state(.oneAtATime)
    let (node, _) = add(BlockOperation {}, to: &state)
    guard let node else { return }
    #expect(state.admission.waitingForTurn == 1)
    _ = state.recordFinish(node)
    #expect(state.admission.waitingForTurn == 0 && state.tasksWaitingForAdmission.isEmpty)
    let opened = state.openAdmission()
    #expect(opened.isEmpty)
  }
}

extension TaskExit {
  /// Whether it goes to its queue at once, without asking for a slot.
  var isQueuedAtOnce: Bool { destination == .queue }

  /// Whether a stop let it go: it is started on the stopping thread.
  var startsCancelled: Bool { destination == .startCancelled }
}
