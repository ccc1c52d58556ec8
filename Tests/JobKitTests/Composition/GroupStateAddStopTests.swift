import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s add-versus-stop transitions fed one by one on one thread (issue 23, item 2):
/// an add that would hand a task out from another thread asks for a job hold first and changes
/// nothing until it has one; a stop drops only what waits; an add in flight keeps
/// `allTasksFinished()` from closing the group. (Mutating calls stay out of `#expect`.)
@Suite("GroupState add versus stop")
struct GroupStateAddStopTests {
  private func accepted(_ outcome: GroupState.AddOutcome) -> GroupState.Launch? {
    guard case .accepted(let launch) = outcome else { return nil }
    return launch
  }

  private func needsJobHold(_ outcome: GroupState.AddOutcome) -> Bool {
    if case .needsJobHold = outcome { return true }
    return false
  }

  private func tasks(_ launch: GroupState.Launch?) -> [Operation] {
    launch.map { Array($0.tasks) } ?? []
  }

  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func anAddBeforeMainWaitsWithoutAHold(mode: GroupState.Mode) {
    var state = GroupState(mode: mode)
    let task = BlockOperation {}
    let launch = accepted(state.add(task))
    #expect(launch != nil && tasks(launch).isEmpty && state.inFlight == 0)
    let started = state.start()
    #expect(tasks(started).first === task)
  }

  /// Running: an add that would start its task at once asks for a hold and changes nothing;
  /// with the hold, the task is handed out in flight, and `allTasksFinished()` keeps the group
  /// open until the start ended.
  @Test func aRunningGroupsAddAsksForAJobHoldFirst() {
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    let task = BlockOperation {}
    let first = state.add(task)
    #expect(needsJobHold(first) && state.members.isEmpty && state.pending.isEmpty)
    let launch = accepted(state.add(task, jobHeld: true))
    #expect(tasks(launch).first === task && launch?.inFlight == true && launch?.cancelled == false)
    #expect(state.inFlight == 1)
    let whileInFlight = state.allTasksFinished()
    #expect(whileInFlight.isKeepOpen && state.phase == .running)
    let releases = state.endInFlight()
    #expect(!releases)
    _ = state.taskFinished(task, error: nil)
    let afterwards = state.allTasksFinished()
    #expect(afterwards.isFinish && state.phase == .closed)
  }

  /// A sequential group with a task running: an added task waits for its turn, which a
  /// callback starts, so no hold is needed.
  @Test func aSequentialAddBehindARunningTaskNeedsNoHold() {
    var state = GroupState(mode: .sequential)
    let running = BlockOperation {}
    _ = state.add(running)
    _ = state.start()
    let next = BlockOperation {}
    let launch = accepted(state.add(next))
    #expect(launch != nil && tasks(launch).isEmpty && state.inFlight == 0)
    guard case .launch(let after) = state.taskFinished(running, error: nil) else {
      Issue.record("expected a launch")
      return
    }
    #expect(tasks(after).first === next && !after.inFlight)
  }

  /// Stopping: an add is tracked with the stopping job (which cancels it and waits for it),
  /// under a job hold; adding it again is a duplicate.
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func anAddToAStoppingGroupIsTrackedUnderAJobHold(mode: GroupState.Mode) {
    var state = GroupState(mode: mode)
    _ = state.start()
    _ = state.stop()
    let task = BlockOperation {}
    let first = state.add(task)
    #expect(needsJobHold(first))
    let launch = accepted(state.add(task, jobHeld: true))
    #expect(tasks(launch).first === task && launch?.cancelled == false && launch?.inFlight == true)
    let again = state.add(task, jobHeld: true)
    guard case .duplicate = again else {
      Issue.record("expected duplicate")
      return
    }
  }

  @Test func aClosedGroupRejectsEveryAdd() {
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    _ = state.allTasksFinished()
    for held in [false, true] {
      guard case .rejected = state.add(BlockOperation {}, jobHeld: held) else {
        Issue.record("expected rejected")
        return
      }
    }
  }

  /// A stop drops the waiting tasks for the job to wait on (`jobWaits`); the job's finish drops
  /// leftovers it can no longer wait on.
  @Test func aStopDropsTheWaitingTasksForTheJobToWaitOn() {
    var state = GroupState(mode: .sequential)
    let tasks = (0..<3).map { _ in BlockOperation {} }
    for task in tasks { _ = state.add(task) }
    let stopped = state.stop()
    #expect(stopped.cancelled && stopped.jobWaits && Array(stopped.tasks).count == 3)
    var other = GroupState(mode: .sequential)
    _ = other.add(BlockOperation {})
    let finished = other.jobFinished()
    #expect(finished.cancelled && !finished.jobWaits && Array(finished.tasks).count == 1)
  }

  /// A resume that would start held tasks asks for a job hold and stays held until it has one.
  @Test func aResumeStartingHeldTasksAsksForAJobHoldFirst() {
    var state = GroupState(mode: .concurrent)
    _ = state.setHold(true, generation: 1)
    _ = state.start()
    let task = BlockOperation {}
    let added = accepted(state.add(task))
    #expect(tasks(added).isEmpty)
    let completion = state.allTasksFinished()
    #expect(completion.isHoldOpen)
    let releases = state.holdTaken()
    #expect(!releases)
    guard case .needsJobHold = state.setHold(false, generation: 2) else {
      Issue.record("expected needsJobHold")
      return
    }
    #expect(state.hold.isHeld && state.hold.generation == 1)
    guard case .launch(let launch) = state.setHold(false, generation: 2, jobHeld: true) else {
      Issue.record("expected a launch")
      return
    }
    #expect(Array(launch.tasks).first === task && launch.inFlight)
    let releasesKeepAlive = state.endInFlight()
    #expect(releasesKeepAlive)  // nothing held waits any more
  }

  /// The resume race of `CommandQueueResumeRaceTests` (issue 23): the router decides to call
  /// `allTasksFinished()` (nothing tracked, no hold), then, before the call, a resume from
  /// another thread takes its job hold, hands the first held task out and has it tracked. The
  /// group must stay open: closing it there stranded the other held tasks (a sequential group
  /// never started them; its job finished once the first was routed, cancelling them), and
  /// rejected the adds racing the resume although the group still ran.
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func allTasksFinishedCalledAfterAResumeHandedATaskOutKeepsTheGroupOpen(mode: GroupState.Mode) {
    var state = GroupState(mode: mode)
    _ = state.setHold(true, generation: 1)
    let tasks = (0..<3).map { _ in BlockOperation {} }
    for task in tasks {
      _ = state.add(task)
    }
    _ = state.start()
    // The router has just decided to call `allTasksFinished()`; the resume wins the race.
    guard case .needsJobHold = state.setHold(false, generation: 2) else {
      Issue.record("expected needsJobHold")
      return
    }
    guard case .launch(let resumed) = state.setHold(false, generation: 2, jobHeld: true) else {
      Issue.record("expected a launch")
      return
    }
    let handedOut = Array(resumed.tasks)
    #expect(handedOut.count == (mode == .sequential ? 1 : 3) && handedOut.first === tasks[0])
    _ = state.endInFlight()  // tracked; then the job's hold is released
    let late = state.allTasksFinished()
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
        let early = state.allTasksFinished()
        #expect(early.isKeepOpen)
      }
    }
    #expect(routed == 3)
    let done = state.allTasksFinished()
    #expect(done.isFinish && state.phase == .closed)
  }

  /// A stale hold change is ignored without asking for a hold.
  @Test func aStaleResumeChangesNothing() {
    var state = GroupState(mode: .concurrent)
    _ = state.start()
    _ = state.setHold(true, generation: 2)
    _ = state.add(BlockOperation {})
    guard case .launch(let launch) = state.setHold(false, generation: 1) else {
      Issue.record("expected a launch")
      return
    }
    #expect(launch.tasks.isEmpty && state.hold.isHeld)
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

  fileprivate var isHoldOpen: Bool {
    if case .holdOpen = self { return true }
    return false
  }
}
