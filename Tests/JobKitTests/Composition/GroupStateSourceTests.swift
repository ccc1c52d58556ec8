import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s source transitions fed one by one on one thread: what each returns is what
/// the group does next. Nothing here starts a queue or a thread. (Mutating calls stay out of
/// `#expect`, whose expansion cannot mutate.)
@Suite("GroupState source transitions")
struct GroupStateSourceTests {
  private func pulledTask(_ pull: GroupState.Pull) -> Operation? {
    guard case .start(let task, _) = pull else { return nil }
    return task
  }

  @Test func slotsAreReservedUpToMaxRunningOnlyWhileRunning() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2)
    let beforeStart = state.reservePull()
    #expect(!beforeStart)
    _ = state.start()
    let reserved = [state.reservePull(), state.reservePull(), state.reservePull()]
    #expect(reserved == [true, true, false])
    let first = BlockOperation {}
    let pulled = [pulledTask(state.pulled(first)), pulledTask(state.pulled(BlockOperation {}))]
    #expect(pulled[0] === first && pulled[1] != nil)
    let whileFull = state.reservePull()
    #expect(!whileFull)
    guard case .launch(let launch) = state.taskFinished(first, error: nil, fromSource: true) else {
      Issue.record("expected a launch")
      return
    }
    #expect(launch.tasks.isEmpty)
    let afterFinish = state.reservePull()
    #expect(afterFinish)  // the finished task's slot
  }

  @Test func anExhaustedSourceIsNotAskedAgain() {
    var job = JobState()
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 4)
    _ = state.start()
    _ = state.reservePull()
    guard case .stop(let launch) = state.pulled(nil) else {
      Issue.record("expected stop")
      return
    }
    #expect(launch.tasks.isEmpty && !launch.cancelled)
    let again = state.reservePull()
    #expect(!again && state.source?.running == 0 && state.source?.isExhausted == true)
    let completion = state.allTasksFinished(job: &job)
    #expect(completion.isFinish && state.phase == .closed)
  }

  /// A cancel between the reservation and the pull: the pulled task is launched cancelled and
  /// the slot freed; nothing more is reserved.
  @Test func aTaskPulledAfterAStopIsLaunchedCancelled() {
    var job = JobState()
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2)
    _ = state.start()
    _ = state.reservePull()
    _ = state.stop(job: &job)
    let task = BlockOperation {}
    guard case .stop(let launch) = state.pulled(task) else {
      Issue.record("expected stop")
      return
    }
    #expect(launch.cancelled && Array(launch.tasks).count == 1 && Array(launch.tasks).first === task)
    let again = state.reservePull()
    #expect(state.source?.running == 0 && !again)
  }

  /// A task already in the group (pulled before, or added) is a duplicate; its slot is freed.
  @Test(arguments: [false, true])
  func aTaskAlreadyInTheGroupIsADuplicateAndFreesItsSlot(wasAdded: Bool) {
    var job = JobState()
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2)
    let task = BlockOperation {}
    if wasAdded {
      _ = state.add(task, job: &job)
    }
    _ = state.start()
    if !wasAdded {
      _ = state.reservePull()
      let first = pulledTask(state.pulled(task))
      #expect(first === task)
    }
    _ = state.reservePull()
    guard case .duplicate(let duplicate) = state.pulled(task) else {
      Issue.record("expected duplicate")
      return
    }
    #expect(duplicate === task && state.source?.running == (wasAdded ? 0 : 1))
    let again = state.reservePull()
    #expect(again)
  }

  /// A sequential group's added tasks wait for the source's end; the pulled task is `current`.
  @Test func aSequentialGroupStartsAddedTasksOnceTheSourceIsExhausted() {
    var job = JobState()
    var state = GroupState(mode: .sequential, sourceMaxRunning: 1)
    let added = BlockOperation {}
    _ = state.add(added, job: &job)
    let started = state.start()
    #expect(started.tasks.isEmpty)  // the source goes first
    _ = state.reservePull()
    let pulled = BlockOperation {}
    _ = state.pulled(pulled)
    let whileRunning = state.reservePull()
    #expect(state.current === pulled && !whileRunning)
    guard case .launch(let afterFirst) = state.taskFinished(pulled, error: nil, fromSource: true) else {
      Issue.record("expected a launch")
      return
    }
    #expect(afterFirst.tasks.isEmpty)  // the source may still yield
    let next = state.reservePull()
    #expect(next)
    guard case .stop(let launch) = state.pulled(nil) else {
      Issue.record("expected stop")
      return
    }
    #expect(Array(launch.tasks).count == 1 && Array(launch.tasks).first === added && !launch.cancelled)
    #expect(state.current === added)
  }
}

extension GroupState.Completion {
  fileprivate var isFinish: Bool {
    if case .finish = self { return true }
    return false
  }
}
