import Foundation
import Testing

@testable import JobKit

/// `GroupState`'s side of a suspension, fed one transition at a time: the waiting tasks are
/// suspended with the job and remembered until the resume, their start or a stop takes them.
/// (Mutating calls stay out of `#expect`.)
@Suite("GroupState suspension")
struct GroupStateSuspensionTests {
  private final class Step: ConcurrentOperation, @unchecked Sendable {}

  private func accepted(_ outcome: GroupState.AddOutcome) -> GroupState.Launch? {
    guard case .accepted(let launch) = outcome else { return nil }
    return launch
  }

  @Test func theWaitingTasksAreSuspendedUntilTheResume() {
    var job = JobState()
    var state = GroupState(mode: .sequential)
    let steps = [Step(), Step(), Step()]
    let plain = BlockOperation {}
    for step in steps { _ = state.add(step, job: &job) }
    _ = state.add(plain, job: &job)
    let suspended = state.suspendWaiting()
    #expect(suspended.map(ObjectIdentifier.init) == steps.map(ObjectIdentifier.init))  // plain ones are not
    let resumed = state.resumeWaiting()
    #expect(Set(resumed.map(ObjectIdentifier.init)) == Set(steps.map(ObjectIdentifier.init)))
    let again = state.resumeWaiting()
    #expect(again.isEmpty)
  }

  /// A suspended task that starts leaves with its launch, so the caller resumes it once tracked
  /// if the resume came meanwhile (the resume no longer finds it).
  @Test func aSuspendedTaskThatStartsLeavesWithItsLaunch() {
    var job = JobState()
    var state = GroupState(mode: .sequential)
    let steps = [Step(), Step()]
    for step in steps { _ = state.add(step, job: &job) }
    _ = state.suspendWaiting()
    let started = state.start()
    #expect(started.suspendedWhileWaiting.map(ObjectIdentifier.init) == [ObjectIdentifier(steps[0])])
    let resumed = state.resumeWaiting()
    #expect(resumed.map(ObjectIdentifier.init) == [ObjectIdentifier(steps[1])])
  }

  /// A task added while suspended is remembered only if it waits; a stop takes what waits.
  @Test func anAddedTaskIsRememberedOnlyWhileItWaitsAndAStopTakesThem() {
    var job = JobState()
    var state = GroupState(mode: .sequential)
    let first = Step()
    let added = Step()
    _ = state.add(first, job: &job)
    _ = state.start()
    _ = accepted(state.add(added, job: &job))
    let waits = state.suspendWaiting(added)
    #expect(waits)
    let notWaiting = state.suspendWaiting(first)  // it runs
    #expect(!notWaiting)
    let stopped = state.stop(job: &job)
    #expect(stopped.cancelled && stopped.suspendedWhileWaiting.map(ObjectIdentifier.init) == [ObjectIdentifier(added)])
    let resumed = state.resumeWaiting()
    #expect(resumed.isEmpty)
  }
}
