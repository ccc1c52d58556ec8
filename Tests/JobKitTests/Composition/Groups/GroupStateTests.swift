import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s transitions fed one by one on one thread, beside the job's state whose lock
/// they share: a routed task's outcome (the next step, a stop on failure, a task that cancelled
/// itself), the source's slots, and the cancellation handler. Nothing here starts a queue or a
/// thread. (Mutating calls stay out of `#expect`.)
@Suite("GroupState transitions")
struct GroupStateTests {
  private let job = JobController()
  private let queue = OperationQueue()

  /// A job configured for `state`, with `tasks` tracked for admission (as `GroupJob.add` does).
  private func jobState(for state: GroupState, adding tasks: [Operation] = []) -> JobState {
    var jobState = JobState()
    state.configure(&jobState)
    for task in tasks {
      guard
        case .tracked(let node, _, _, _, _, _) = jobState.track(
          task, node: TaskNode(job: job, task: task), queue: queue, waitsForAdmission: true)
      else {
        Issue.record("not tracked")
        continue
      }
      _ = jobState.enterAdmission(node, queue: queue)
    }
    return jobState
  }

  private func proceeded(_ routing: GroupState.Routing) -> (tasks: [Operation], pulls: Bool)? {
    guard case .proceed(let exit, let pull) = routing else { return nil }
    return (exit.map { [$0.task] } ?? [], pull != nil)
  }

  private func isCancel(_ routing: GroupState.Routing) -> Bool {
    if case .cancel = routing { return true }
    return false
  }

  // MARK: Routing

  /// A sequential group: the routed task's turn ends and the next added task goes.
  @Test func aSequentialGroupsNextTaskGoesWhenTheOneBeforeIsRouted() {
    var state = GroupState(mode: .sequential)
    let tasks = [BlockOperation {}, BlockOperation {}]
    var job = jobState(for: state, adding: tasks)
    let started = state.start(job: &job)
    #expect(started.map(\.task).first === tasks[0] && started.count == 1)
    let next = proceeded(state.taskRouted(tasks[0], error: nil, job: &job))
    #expect(next?.tasks.first === tasks[1] && next?.pulls == false)
  }

  /// A sequential group that stops on failure fails its job with the task's error; without
  /// `stopsOnFailure`, or while the job stops already, it goes on.
  @Test(arguments: [false, true])
  func aFailedStepFailsTheJobOnlyIfAsked(stopsOnFailure: Bool) {
    var state = GroupState(mode: .sequential)
    state.setStopsOnFailure(stopsOnFailure)
    let tasks = [BlockOperation {}, BlockOperation {}]
    var job = jobState(for: state, adding: tasks)
    _ = state.start(job: &job)
    let routing = state.taskRouted(tasks[0], error: CancellationError(), job: &job)
    if stopsOnFailure {
      guard case .fail = routing else {
        Issue.record("expected fail")
        return
      }
      _ = job.stop(.cancelled(reason: nil))
      let whileStopping = state.taskRouted(tasks[1], error: CancellationError(), job: &job)
      #expect(proceeded(whileStopping) != nil)
    } else {
      #expect(proceeded(routing)?.tasks.first === tasks[1])
    }
  }

  /// A running group that propagates: the routed task asks to cancel the job, and its turn is
  /// not over (nothing more goes).
  @Test(arguments: [GroupState.Mode.sequential, .concurrent])
  func aSelfCancelledTaskCancelsAPropagatingGroup(mode: GroupState.Mode) {
    var state = GroupState(mode: mode, propagatesTaskCancellation: true)
    let tasks = [BlockOperation {}, BlockOperation {}]
    var job = jobState(for: state, adding: tasks)
    _ = state.start(job: &job)
    let routing = state.taskRouted(tasks[0], error: nil, cancelledItself: true, job: &job)
    #expect(isCancel(routing))
  }

  /// Turned off, or for a task that did not cancel itself: an ordinary finish, the next goes.
  @Test(arguments: [false, true])
  func otherwiseTheNextTaskGoes(propagates: Bool) {
    var state = GroupState(mode: .sequential, propagatesTaskCancellation: propagates)
    let tasks = [BlockOperation {}, BlockOperation {}]
    var job = jobState(for: state, adding: tasks)
    _ = state.start(job: &job)
    let routing = state.taskRouted(tasks[0], error: nil, cancelledItself: !propagates, job: &job)
    #expect(proceeded(routing)?.tasks.first === tasks[1])
  }

  /// A job that stops already (cancelled, or stopping on a failure) ignores a self-cancel.
  @Test func aStoppingJobIgnoresASelfCancel() {
    var state = GroupState(mode: .concurrent, propagatesTaskCancellation: true)
    let task = BlockOperation {}
    var job = jobState(for: state, adding: [task])
    _ = state.start(job: &job)
    _ = job.stop(.cancelled(reason: nil))
    let routing = state.taskRouted(task, error: nil, cancelledItself: true, job: &job)
    #expect(!isCancel(routing))
  }

  // MARK: The source

  @Test func slotsAreReservedUpToMaxRunningOnlyWhileRunning() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2)
    var job = jobState(for: state)
    let context = JobContext()
    _ = job.admission.replaceShared(with: context)
    let beforeStart = state.reservePull(job: job)
    #expect(beforeStart == nil)
    _ = state.start(job: &job)
    let reserved = [state.reservePull(job: job), state.reservePull(job: job), state.reservePull(job: job)]
    // Only the second took the last free slot; each hands on the group's context.
    #expect(reserved.map { $0?.isLast } == [false, true, nil])
    #expect(reserved[0]?.shared === context && reserved[1]?.shared === context)
    let first = BlockOperation {}
    // The finished task's slot is reserved for the next pull at once, as the last free one.
    guard case .proceed(let exit, let pull) = state.taskRouted(first, error: nil, fromSource: true, job: &job) else {
      Issue.record("expected proceed")
      return
    }
    #expect(exit == nil && pull?.isLast == true && state.source?.running == 2)
    let full = state.reservePull(job: job)
    #expect(full == nil)
  }

  @Test func anExhaustedSourceIsNotAskedAgain() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 4)
    var job = jobState(for: state)
    _ = state.start(job: &job)
    _ = state.reservePull(job: job)
    let exits = state.sourceExhausted(job: &job)
    #expect(exits.isEmpty)
    let again = state.reservePull(job: job)
    #expect(again == nil && state.source?.running == 0 && state.source?.isExhausted == true)
  }

  /// A stop: no more slots are reserved; a task not tracked frees its slot.
  @Test func aStopEndsThePulling() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2)
    var job = jobState(for: state)
    _ = state.start(job: &job)
    let reserved = state.reservePull(job: job)
    _ = job.stop(.cancelled(reason: nil))
    // The reserved slot's task is still pulled and tracked (cancelled, waited for); one that is
    // not tracked frees its slot.
    #expect(reserved != nil)
    state.pullNotTracked()
    let again = state.reservePull(job: job)
    #expect(state.source?.running == 0 && again == nil)
  }

  /// A source task that cancelled itself frees its slot and reserves none.
  @Test func aSourceTaskThatCancelledItselfReservesNoSlot() {
    var state = GroupState(mode: .concurrent, sourceMaxRunning: 2, propagatesTaskCancellation: true)
    var job = jobState(for: state)
    _ = state.start(job: &job)
    _ = state.reservePull(job: job)
    let task = BlockOperation {}
    let routing = state.taskRouted(task, error: nil, cancelledItself: true, fromSource: true, job: &job)
    #expect(isCancel(routing) && state.source?.running == 0)
  }

  /// A sequential group's added tasks wait for the source's end.
  @Test func aSequentialGroupStartsAddedTasksOnceTheSourceIsExhausted() {
    var state = GroupState(mode: .sequential, sourceMaxRunning: 1)
    let added = BlockOperation {}
    var job = jobState(for: state, adding: [added])
    let started = state.start(job: &job)
    #expect(started.isEmpty)  // the source goes first
    _ = state.reservePull(job: job)
    let pulled = BlockOperation {}
    let whileRunning = state.reservePull(job: job)
    #expect(whileRunning == nil)
    let afterFirst = proceeded(state.taskRouted(pulled, error: nil, fromSource: true, job: &job))
    #expect(afterFirst?.tasks.isEmpty == true && afterFirst?.pulls == true)  // the source may still yield
    let exits = state.sourceExhausted(job: &job)
    #expect(exits.count == 1 && exits.first?.task === added)
  }

  // MARK: The cancellation handler

  /// Replaced (the old one returned for release), taken once at the finish, and a handler set
  /// after that is returned at once instead of kept.
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
