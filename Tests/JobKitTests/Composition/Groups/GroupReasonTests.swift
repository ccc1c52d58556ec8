import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task cancelled with a reason (not by its group) cancels its group with that reason: the
/// group's other tasks, the group's `run()` and the groups above it see it.
@Suite("A group cancelled by its task takes the task's reason")
struct GroupReasonTests {
  @Test func theOtherTasksAndRunSeeTheReasonOfTheTaskThatCancelledItself() async {
    let running = ManualTask("running")
    let stopped = ManualTask("stopped")
    let group = ConcurrentGroup([running, stopped])
    group.startJob()
    #expect(await running.startedLatch.waitOpen())
    #expect(await stopped.startedLatch.waitOpen())
    stopped.cancel(reason: TestError(61))
    await #expect(throws: TestError(61)) { try await group.run() }
    #expect(group.cancellationReason as? TestError == TestError(61))
    #expect(running.cancellationReason as? TestError == TestError(61))
    #expect(group.error == nil)
  }

  @Test func aNestedGroupHandsTheReasonUpToTheGroupAboveAndItsLaterSteps() async {
    let stopped = ManualTask("stopped")
    let inner = ConcurrentGroup([stopped])
    let later = ManualTask("later")
    let outer = SequentialGroup([inner, later])
    outer.startJob()
    #expect(await stopped.startedLatch.waitOpen())
    stopped.cancel(reason: TestError(62))
    await #expect(throws: TestError(62)) { try await outer.run() }
    #expect(inner.cancellationReason as? TestError == TestError(62))
    #expect(outer.cancellationReason as? TestError == TestError(62))
    #expect(!later.didStart)
  }

  @Test func aPlainCancelOfATaskStillMeansCancellationError() async {
    let running = ManualTask("running")
    let stopped = ManualTask("stopped")
    let group = ConcurrentGroup([running, stopped])
    group.startJob()
    #expect(await stopped.startedLatch.waitOpen())
    stopped.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(running.cancellationReason is CancellationError)
  }
}
