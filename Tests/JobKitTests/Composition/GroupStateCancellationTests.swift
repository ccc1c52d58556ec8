import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s transitions for a task that cancelled itself and for the cancellation handler
/// (issue 20, item 1), fed one by one on one thread. (Mutating calls stay out of `#expect`.)
@Suite("GroupState: a task that cancelled itself")
struct GroupStateCancellationTests {
  private func isCancel(_ routing: GroupState.Routing) -> Bool {
    if case .cancel = routing { return true }
    return false
  }

  private func launched(_ routing: GroupState.Routing) -> [Operation] {
    guard case .launch(let launch) = routing else { return [] }
    return Array(launch.tasks)
  }

  /// A running group that propagates: the routed task asks to cancel the group, nothing more
  /// starts (the group is stopping), and the stop that follows drops the waiting tasks.
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func aSelfCancelledTaskStopsAPropagatingGroup(mode: GroupState.Mode) {
    var job = JobState()
    var state = GroupState(mode: mode, propagatesTaskCancellation: true)
    let first = BlockOperation {}
    let second = BlockOperation {}
    _ = state.add(first, job: &job)
    _ = state.add(second, job: &job)
    let started = state.start()
    #expect(Array(started.tasks).first === first)
    let routing = state.taskFinished(first, error: nil, cancelledItself: true)
    #expect(isCancel(routing) && state.phase == .stopping && state.current == nil)
    // An add or a resume from another thread now starts nothing: the group is stopping.
    let third = BlockOperation {}
    let add = state.add(third, job: &job)
    // Tracked with the stopping job under a hold, never started by the group.
    if case .accepted(let launch) = add {
      #expect(launch.inFlight && !launch.cancelled && job.holds == 1)
    } else {
      Issue.record("a stopping group's add must be tracked under a hold")
    }
    let stop = state.stop(job: &job)
    if mode == .sequential {
      #expect(stop.cancelled && stop.jobWaits && Array(stop.tasks).first === second)
    } else {
      #expect(stop.tasks.isEmpty)  // a concurrent group started both
    }
    let again = state.stop(job: &job)
    #expect(again.tasks.isEmpty)
  }

  /// Turned off, or for a task that did not cancel itself: an ordinary finish, the next starts.
  @Test(arguments: [false, true])
  func otherwiseTheNextTaskStarts(propagates: Bool) {
    var job = JobState()
    var state = GroupState(mode: .sequential, propagatesTaskCancellation: propagates)
    let first = BlockOperation {}
    let second = BlockOperation {}
    _ = state.add(first, job: &job)
    _ = state.add(second, job: &job)
    _ = state.start()
    let routing = state.taskFinished(first, error: nil, cancelledItself: !propagates)
    #expect(launched(routing).first === second && state.phase == .running)
  }

  /// A group that is stopping already (cancelled, or stopping on a failure) ignores it.
  @Test func aStoppingGroupIgnoresIt() {
    var job = JobState()
    var state = GroupState(mode: .concurrent, propagatesTaskCancellation: true)
    let task = BlockOperation {}
    _ = state.add(task, job: &job)
    _ = state.start()
    _ = state.stop(job: &job)
    let routing = state.taskFinished(task, error: nil, cancelledItself: true)
    #expect(!isCancel(routing) && launched(routing).isEmpty && state.phase == .stopping)
  }

  /// A task pulled from a source frees its slot and stops the pulling.
  @Test func aSourceTaskThatCancelledItselfStopsThePulling() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2, propagatesTaskCancellation: true)
    _ = state.start()
    let task = BlockOperation {}
    let reserved = state.reservePull()
    #expect(reserved)
    _ = state.pulled(task)
    let routing = state.taskFinished(task, error: nil, cancelledItself: true, fromSource: true)
    #expect(isCancel(routing) && state.source?.running == 0)
    let more = state.reservePull()
    #expect(!more)
  }

  /// The handler: replaced (the old one returned for release), taken once at the finish, and a
  /// handler set after that is returned at once instead of kept.
  @Test func theHandlerIsTakenOnce() {
    var state = GroupState(mode: .sequential)
    let first: @Sendable () -> Void = {}
    let none = state.setCancellationHandler(first)
    #expect(none == nil && state.currentCancellationHandler != nil)
    let replaced = state.setCancellationHandler({})
    #expect(replaced != nil)
    let taken = state.takeCancellationHandler()
    #expect(taken != nil && state.currentCancellationHandler == nil)
    let twice = state.takeCancellationHandler()
    #expect(twice == nil)
    let late = state.setCancellationHandler({})
    #expect(late != nil && state.currentCancellationHandler == nil)
  }
}
