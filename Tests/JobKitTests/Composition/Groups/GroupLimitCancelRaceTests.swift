import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A nested group's time limit runs out, and one of its tasks cancels itself in the window
/// between the limit recording the group's reason and the limit recording the group's stop
/// (composition seed 5449). The first reason decides how the group stops: it fails with its
/// limit, so the group above sees a failed task, not one that cancelled itself, and is not
/// cancelled with the limit of the group below.
@Suite("Groups: a task cancelling itself while its group's time limit stops it", .timeLimit(.minutes(1)))
struct GroupLimitCancelRaceTests {
  /// A `ConcurrentGroup` whose limit's stop, right after it recorded the group's reason, cancels
  /// `storm` (plainly, from outside the group, as a cancel storm does) and waits until the
  /// task's routing cancelled the group, before the stop goes on.
  private final class LimitWindowGroup: ConcurrentGroup, @unchecked Sendable {
    // @unchecked Sendable: the task and the latch are thread-safe.
    let storm: TestTask
    let cancelArrived = Latch()
    let cancelledInWindow = Latch()

    init(storm: TestTask) {
      self.storm = storm
      super.init([storm])
    }

    override func adoptFailureReason(_ error: any Error) {
      super.adoptFailureReason(error)
      storm.cancel()  // finishes the task; the group routes it as a task that cancelled itself
      if cancelArrived.wait(timeout: 30) {
        cancelledInWindow.open()
      }
    }

    override func cancellationRequested() {
      super.cancellationRequested()
      cancelArrived.open()
    }
  }

  @Test func theGroupFailsWithItsLimitAndTheGroupAboveIsNotCancelledWithIt() async {
    let clock = ManualClock()
    let storm = TestTask("n5")
    let inner = LimitWindowGroup(storm: storm)
    inner.clock = clock
    inner.timeLimit = .seconds(9)
    let outer = ConcurrentGroup([inner])
    outer.startJob()
    #expect(await storm.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(9))
    #expect(inner.cancelledInWindow.opened)
    let finished = await outer.finishedSoon()
    #expect(finished)
    if !finished { outer.cancel() }
    #expect(storm.cancellationReason is CancellationError)
    #expect(inner.error as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(inner.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(outer.cancellationReason == nil)
    #expect(!outer.isCancelled)
  }
}
