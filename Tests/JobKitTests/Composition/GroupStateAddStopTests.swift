import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s add-versus-stop transitions fed one by one on one thread, beside the job's
/// state whose lock they share: an add that hands a task out from another thread takes a job
/// hold in the same transition (none if the job finished: rejected); a stop drops only what
/// waits; an add in flight keeps `allTasksFinished()` from closing the group. (Mutating calls
/// stay out of `#expect`.)
@Suite("GroupState add versus stop")
struct GroupStateAddStopTests {
  private func accepted(_ outcome: GroupState.AddOutcome) -> GroupState.Launch? {
    guard case .accepted(let launch) = outcome else { return nil }
    return launch
  }

  private func tasks(_ launch: GroupState.Launch?) -> [Operation] {
    launch.map { Array($0.tasks) } ?? []
  }

  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func anAddBeforeMainWaitsWithoutAHold(mode: GroupState.Mode) {
    var job = JobState()
    var state = GroupState(mode: mode)
    let task = BlockOperation {}
    let launch = accepted(state.add(task, job: &job))
    #expect(launch != nil && tasks(launch).isEmpty && state.inFlight == 0 && job.holds == 0)
    let started = state.start()
    #expect(tasks(started).first === task)
  }

  /// Running: an add that starts its task at once takes a job hold in the same transition and
  /// hands the task out in flight; `allTasksFinished()` keeps the group open until the start
  /// ended, which releases the hold.
  @Test func aRunningGroupsAddTakesAJobHoldInTheSameTransition() {
    var job = JobState()
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    let task = BlockOperation {}
    let launch = accepted(state.add(task, job: &job))
    #expect(tasks(launch).first === task && launch?.inFlight == true && launch?.cancelled == false)
    #expect(state.inFlight == 1 && job.holds == 1)
    let whileInFlight = state.allTasksFinished(job: &job)
    #expect(whileInFlight.isKeepOpen && state.phase == .running)
    state.endInFlight(job: &job)
    #expect(job.holds == 0)
    _ = state.taskFinished(task, error: nil)
    let afterwards = state.allTasksFinished(job: &job)
    #expect(afterwards.isFinish && state.phase == .closed)
  }

  /// A running group whose job finished (its router is on its way to `operationDidFinish`)
  /// rejects an add that would start at once: the hold is refused, nothing changes.
  @Test func anAddToARunningGroupWhoseJobFinishedIsRejected() {
    var job = JobState()
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    _ = job.beginMain(on: 1)
    job.mainReturned()
    guard case .allTasksFinished = job.nextStep() else {
      Issue.record("expected allTasksFinished() to be due")
      return
    }
    guard job.allTasksFinishedReturned() != nil else {
      Issue.record("expected the job to finish")
      return
    }
    let task = BlockOperation {}
    guard case .rejected = state.add(task, job: &job) else {
      Issue.record("expected rejected")
      return
    }
    #expect(state.members.isEmpty && state.pending.isEmpty && state.inFlight == 0)
  }

  /// A sequential group with a task running: an added task waits for its turn, which a
  /// callback starts, so no hold is needed.
  @Test func aSequentialAddBehindARunningTaskNeedsNoHold() {
    var job = JobState()
    var state = GroupState(mode: .sequential)
    let running = BlockOperation {}
    _ = state.add(running, job: &job)
    _ = state.start()
    let next = BlockOperation {}
    let launch = accepted(state.add(next, job: &job))
    #expect(launch != nil && tasks(launch).isEmpty && state.inFlight == 0 && job.holds == 0)
    guard case .launch(let after) = state.taskFinished(running, error: nil) else {
      Issue.record("expected a launch")
      return
    }
    #expect(tasks(after).first === next && !after.inFlight)
  }

  /// Stopping: an add is tracked with the stopping job (which cancels it and waits for it),
  /// under a job hold; adding it again is a duplicate, which takes no hold.
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func anAddToAStoppingGroupIsTrackedUnderAJobHold(mode: GroupState.Mode) {
    var job = JobState()
    var state = GroupState(mode: mode)
    _ = state.start()
    _ = state.stop(job: &job)
    let task = BlockOperation {}
    let launch = accepted(state.add(task, job: &job))
    #expect(tasks(launch).first === task && launch?.cancelled == false && launch?.inFlight == true)
    #expect(job.holds == 1)
    let again = state.add(task, job: &job)
    guard case .duplicate = again else {
      Issue.record("expected duplicate")
      return
    }
    #expect(job.holds == 1)
  }

  @Test func aClosedGroupRejectsEveryAdd() {
    var job = JobState()
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    _ = state.allTasksFinished(job: &job)
    guard case .rejected = state.add(BlockOperation {}, job: &job) else {
      Issue.record("expected rejected")
      return
    }
    #expect(job.holds == 0)
  }

  /// A stop drops the waiting tasks for the job to wait on (`jobWaits`); the job's finish drops
  /// leftovers it can no longer wait on.
  @Test func aStopDropsTheWaitingTasksForTheJobToWaitOn() {
    var job = JobState()
    var state = GroupState(mode: .sequential)
    let tasks = (0..<3).map { _ in BlockOperation {} }
    for task in tasks { _ = state.add(task, job: &job) }
    let stopped = state.stop(job: &job)
    #expect(stopped.cancelled && stopped.jobWaits && Array(stopped.tasks).count == 3)
    var other = GroupState(mode: .sequential)
    _ = other.add(BlockOperation {}, job: &job)
    let finished = other.jobFinished(job: &job)
    #expect(finished.cancelled && !finished.jobWaits && Array(finished.tasks).count == 1)
  }

  /// Held tasks wait: `allTasksFinished()` holds the job open in the same transition; a resume
  /// hands them out in flight under a hold of its own, and ending the start releases both.
  @Test func aResumeStartingHeldTasksHoldsTheJobInTheSameTransition() {
    var job = JobState()
    var state = GroupState(mode: .concurrent)
    _ = state.setHold(true, generation: 1, job: &job)
    _ = state.start()
    let task = BlockOperation {}
    let added = accepted(state.add(task, job: &job))
    #expect(tasks(added).isEmpty)
    let completion = state.allTasksFinished(job: &job)
    #expect(completion.isKeepOpen && state.keepsJobOpen && job.holds == 1)
    let launch = state.setHold(false, generation: 2, job: &job)
    #expect(Array(launch.tasks).first === task && launch.inFlight && job.holds == 2)
    state.endInFlight(job: &job)
    #expect(job.holds == 0 && !state.keepsJobOpen)  // nothing held waits any more
  }

  /// The resume race of `CommandQueueResumeRaceTests`: the router decides to call
  /// `allTasksFinished()` (nothing tracked, no hold), then, before the call, a resume from
  /// another thread takes its job hold, hands the first held task out and has it tracked. The
  /// group must stay open: closing it there stranded the other held tasks (a sequential group
  /// never started them; its job finished once the first was routed, cancelling them), and
  /// rejected the adds racing the resume although the group still ran.
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func allTasksFinishedCalledAfterAResumeHandedATaskOutKeepsTheGroupOpen(mode: GroupState.Mode) {
    var job = JobState()
    var state = GroupState(mode: mode)
    _ = state.setHold(true, generation: 1, job: &job)
    let tasks = (0..<3).map { _ in BlockOperation {} }
    for task in tasks {
      _ = state.add(task, job: &job)
    }
    _ = state.start()
    // The router has just decided to call `allTasksFinished()`; the resume wins the race.
    let resumed = state.setHold(false, generation: 2, job: &job)
    #expect(job.holds == 1)
    let handedOut = Array(resumed.tasks)
    #expect(handedOut.count == (mode == .sequential ? 1 : 3) && handedOut.first === tasks[0])
    state.endInFlight(job: &job)  // tracked; the job's hold is released
    let late = state.allTasksFinished(job: &job)
    #expect(late.isKeepOpen && state.phase == .running)
    // Routing the handed-out tasks starts the rest (sequential), then the group closes.
    var routed = 0
    var next = handedOut
    while let task = next.first {
      next.removeFirst()
      routed += 1
      guard case .launch(let launch) = state.taskFinished(task, error: nil) else {
        Issue.record("expected a launch")
        return
      }
      next += Array(launch.tasks)
      if !next.isEmpty {
        let early = state.allTasksFinished(job: &job)
        #expect(early.isKeepOpen)
      }
    }
    #expect(routed == 3)
    let done = state.allTasksFinished(job: &job)
    #expect(done.isFinish && state.phase == .closed && job.holds == 0)
  }

  /// A stale hold change is ignored without taking a hold.
  @Test func aStaleResumeChangesNothing() {
    var job = JobState()
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    _ = state.setHold(true, generation: 2, job: &job)
    _ = state.add(BlockOperation {}, job: &job)
    let launch = state.setHold(false, generation: 1, job: &job)
    #expect(launch.tasks.isEmpty && state.hold.isHeld && job.holds == 0)
  }
}

extension GroupState.Completion {
  fileprivate var isFinish: Bool {
    if case .finish = self { return true }
    return false
  }

  fileprivate var isKeepOpen: Bool {
    if case .keepOpen = self { return true }
    return false
  }
}
