import Foundation
import JobKit
import JobKitTesting
import Testing

/// `onDrained` gets the failures of the commands the queue did not cancel, like
/// `JobController.failures` (found by the composition model, issue 23: the docs said "each
/// command that finished with an error", but a command that ignores `cancelAll()` and then fails
/// is, by design, not listed; the docs now say so).
@Suite("CommandQueue drained failures")
struct CommandQueueDrainedFailuresTests {
  /// Runs until released, ignoring a cancel, then fails.
  final class FailsWhenReleased: ConcurrentOperation, @unchecked Sendable {
    // @unchecked Sendable: the latches are thread-safe; nothing else is stored.
    let started = Latch()
    let release = Latch()

    override func operationStart() {
      started.open()
      Thread {
        // Long: under a ThreadSanitizer stall of a parallel run the test thread can take more
        // than the default 30 s to cancel, and failing before the cancel is the control case.
        _ = self.release.wait(timeout: 600)
        self.operationDone(error: ModelError(spec: 1))
      }.start()
    }
  }

  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aCommandThatFailsAfterCancelAllIsNotReported(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let reported = ModelLocked<[String]>([])
    queue.onDrained = { failures in reported.withLock { $0 += failures.map(\.taskName) } }
    let command = FailsWhenReleased()
    command.name = "ignoresCancelAndFails"
    queue.add(command)
    #expect(await command.started.waitOpen())
    queue.cancelAll()
    command.release.open()
    await queue.drained()
    #expect(command.error != nil)
    #expect(reported.withLock { $0 }.isEmpty)
  }

  /// Without `cancelAll()`, the same command's failure is reported (the control case).
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aCommandThatFailsIsReported(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let reported = ModelLocked<[String]>([])
    queue.onDrained = { failures in reported.withLock { $0 += failures.map(\.taskName) } }
    let command = FailsWhenReleased()
    command.name = "fails"
    queue.add(command)
    #expect(await command.started.waitOpen())
    command.release.open()
    await queue.drained()
    #expect(reported.withLock { $0 } == ["fails"])
  }
}
