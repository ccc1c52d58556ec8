import Foundation
import JobKit
import JobKitTesting
import Testing

/// Found by the composition model (issue 23): `onDrained` is documented to get "each command
/// that finished with an error", but it gets the burst's `JobController.failures`, which leave
/// out the tasks the job cancelled itself. A command that ignores `cancelAll()` and then fails is
/// never reported. Marked as a known issue until the docs or `CommandQueue` change; when fixed,
/// `withKnownIssue` fails and says so.
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
        _ = self.release.wait()
        self.operationDone(error: ModelError(spec: 1))
      }.start()
    }
  }

  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aCommandThatFailsAfterCancelAllIsReported(mode: CommandQueue.Mode) async {
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
    withKnownIssue("onDrained leaves out a command that failed after cancelAll() (issue 23, composition model)") {
      #expect(reported.withLock { $0 } == ["ignoresCancelAndFails"])
    }
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
