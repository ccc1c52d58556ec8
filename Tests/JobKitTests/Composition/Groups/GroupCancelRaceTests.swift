import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task whose `cancel()` blocks until the test releases it: the thread cancelling a group is
/// held between the group dropping its waiting tasks and starting them untracked, so a test can
/// look at the group right then, with no sleep.
private final class GateOnCancel: Operation, @unchecked Sendable {
  // @unchecked Sendable: only latches, which are thread-safe.
  let entered = Latch()
  let release = Latch()

  override func cancel() {
    entered.open()
    _ = release.wait(timeout: 30)
    super.cancel()
  }
}

/// A group's waiting tasks, dropped by a cancel (or a stop before `main()`), finish before the
/// group does: the group is one step, finished only when everything inside it is (the ModelBased
/// failure of seed 9515, where the parent's job finished while a cancelled group's dropped
/// `BlockTask`s were not started yet).
@Suite("Group cancel races")
struct GroupCancelRaceTests {
  /// Cancelled before its queue starts it: the start (which corelibs makes at once after a
  /// cancel) must not finish the group while the cancelling thread still starts the dropped tasks.
  @Test(arguments: GroupKind.allCases)
  func startRacingACancelWaitsForTheDroppedTasks(kind: GroupKind) async throws {
    let gate = GateOnCancel()
    let after = BlockTask {}
    let group = kind.make([gate, after])
    let cancelReturned = Latch()
    Thread {
      group.cancel()
      cancelReturned.open()
    }.start()
    #expect(await gate.entered.opened())
    // The cancelling thread dropped the waiting tasks and is starting them; the group starts now.
    group.start()
    #expect(!group.isFinished)
    #expect(!gate.isFinished && !after.isFinished)
    gate.release.open()
    #expect(await cancelReturned.opened())
    #expect(gate.isFinished && after.isFinished)
    #expect(await group.finishedSoon())
    #expect(group.isCancelled && group.error == nil)
  }

  /// Cancelled, or failed from another thread, while its first task runs: that task finishes at
  /// once and is routed on the stopping thread, which must not let the group finish before the
  /// tasks it drops finished (after a fail, they used to be dropped only once it had finished).
  @Test(arguments: [false, true])
  func stopWhileRunningWaitsForTheDroppedTasks(failing: Bool) async throws {
    let running = TestTask("running", finishesOnCancel: true)
    let gate = GateOnCancel()
    let after = BlockTask {}
    let group = SequentialGroup([running, gate, after])
    group.startJob()
    #expect(await running.startedLatch.opened())
    let stopReturned = Latch()
    Thread {
      if failing {
        group.fail(TestError(1))
      } else {
        group.cancel()
      }
      stopReturned.open()
    }.start()
    #expect(await gate.entered.opened())
    #expect(!group.isFinished)
    gate.release.open()
    #expect(await stopReturned.opened())
    #expect(running.isFinished && gate.isFinished && after.isFinished)
    #expect(await group.finishedSoon())
    if failing {
      #expect(group.error as? TestError == TestError(1))
    } else {
      #expect(group.isCancelled && group.error == nil)
    }
  }

  /// The model's shape: a parent cancels a nested group; neither finishes before the nested
  /// group's dropped tasks did.
  @Test func cancelledNestedGroupFinishesItsDroppedTasksBeforeItsParent() async throws {
    let running = TestTask("running", finishesOnCancel: true)
    let gate = GateOnCancel()
    let after = BlockTask {}
    let inner = SequentialGroup([running, gate, after])
    let outer = SequentialGroup([inner])
    outer.startJob()
    #expect(await running.startedLatch.opened())
    let cancelReturned = Latch()
    Thread {
      outer.cancel()
      cancelReturned.open()
    }.start()
    #expect(await gate.entered.opened())
    #expect(!inner.isFinished && !outer.isFinished)
    gate.release.open()
    #expect(await cancelReturned.opened())
    #expect(gate.isFinished && after.isFinished)
    #expect(await outer.finishedSoon())
    #expect(inner.isFinished && inner.isCancelled)
  }

  /// Failed before it started: `main()` does not run, yet the waiting tasks are cancelled and
  /// finish, without running, before the group finishes with the error.
  @Test(arguments: GroupKind.allCases)
  func failBeforeStartFinishesTheWaitingTasks(kind: GroupKind) async throws {
    let ran = Locked(0)
    let tasks = (0..<2).map { _ in BlockTask { ran.mutate { $0 += 1 } } }
    let group = kind.make(tasks)
    group.fail(TestError(1))
    group.start()
    #expect(group.isFinished)
    #expect(tasks.allSatisfy { $0.isFinished && $0.isCancelled })
    #expect(ran.value == 0)
    #expect(group.error as? TestError == TestError(1))
  }
}
