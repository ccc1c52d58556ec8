import Foundation
import JobKit
import JobKitTesting
import Testing

/// When `drained()` returns, `onDrained` has reported every failure of the commands it waited
/// for (issue 23; the composition model's seeds 87 and 244, about 1 workflow in 10,000: a queue
/// runner read its failures from `onDrained` right after `drained()` and found none).
///
/// Two ways broke it: `drained()` called while the drained handler was still on its way (the
/// queue idle, its last burst gone, the handler not yet returned) returned at once; and a
/// `drained()` whose bursts finished while a newer burst ran returned with no `onDrained` call
/// at all (the handler waited for the queue to be idle). Both are driven here step by step:
/// `Task.immediate` registers the `drained()` caller before the test goes on.
@Suite("CommandQueue drained() reports first", .timeLimit(.minutes(1)))
struct CommandQueueDrainedReportTests {
  private static func codes(_ failures: [TaskFailure]) -> [Int] {
    failures.compactMap { ($0.error as? TestError)?.id }
  }

  /// Registers a `drained()` caller that returns the handler calls made by then, then cancels
  /// the queue's commands and adds a newer one.
  private static func drainedCallThenCancelAndAdd(
    to queue: CommandQueue,
    reading calls: Locked<[[Int]]>
  ) -> (waiter: Task<[[Int]], Never>, newer: ManualTask) {
    let waiter = Task.immediate { () -> [[Int]] in
      await queue.drained()
      return calls.value
    }
    queue.cancelAll()
    let newer = ManualTask("newer")
    queue.add(newer)
    return (waiter, newer)
  }

  /// The handler runs (blocked on a thread of the test's own) when `drained()` is called: the
  /// call waits for it to return.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aDrainedCallWhileTheHandlerRunsWaitsForIt(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let entered = Latch()
    let release = Latch()
    let reported = Locked<[Int]?>(nil)
    queue.onDrained = { failures in
      entered.open()
      _ = release.wait(timeout: 30)
      reported.mutate { $0 = Self.codes(failures) }
    }
    let command = ManualTask("fails")
    queue.add(command)
    #expect(await command.startedLatch.opened())
    // The burst finishes, and its handler runs, on this thread: blocking it blocks no pool thread.
    Thread { command.finish(error: TestError(7)) }.start()
    #expect(await entered.opened())
    let waiter = Task.immediate { () -> [Int]? in
      await queue.drained()
      return reported.value
    }
    release.open()
    #expect(await waiter.value == [7])
  }

  /// A `drained()` caller waits for a burst with a failed command; `cancelAll()` (which the
  /// command finished before) and an add make a newer burst, which runs (concurrent) or waits
  /// (sequential) when the older one finishes. The caller does not wait for the newer burst,
  /// and `onDrained` reports the failure before it returns; the queue drains later with a call
  /// of its own.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aDrainedCallWhoseBurstsFinishBesideANewerOneGetsTheFailuresReported(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let calls = Locked<[[Int]]>([])
    queue.onDrained = { failures in calls.mutate { $0.append(Self.codes(failures)) } }
    let failing = ManualTask("fails")
    let ignoring = ManualTask("ignores cancel", finishesOnCancel: false)
    queue.add(failing)
    queue.add(ignoring)
    #expect(await failing.startedLatch.opened())
    await onThread { failing.finish(error: TestError(1)) }
    #expect(await ignoring.startedLatch.opened())
    // Routed (so it counts as a failure of its burst, not a cancelled one) in both modes.
    #expect(await eventually { !queue.commands.contains(failing) })
    let (waiter, newer) = Self.drainedCallThenCancelAndAdd(to: queue, reading: calls)
    if mode == .concurrent {
      #expect(await newer.startedLatch.opened())
    }
    await onThread { ignoring.finish() }
    #expect(await waiter.value == [[1]])
    #expect(await newer.startedLatch.opened())
    #expect(!newer.isFinished)
    newer.finish()
    await queue.drained()
    #expect(calls.value == [[1], []])
  }

  /// Without a failure to report, a caller whose bursts finished beside a newer one returns
  /// without an `onDrained` call: the handler is still called only when the queue drained.
  @Test func aDrainedCallWithNothingToReportMakesNoCall() async {
    let queue = CommandQueue(mode: .concurrent)
    let calls = Locked<[[Int]]>([])
    queue.onDrained = { failures in calls.mutate { $0.append(Self.codes(failures)) } }
    let ignoring = ManualTask("ignores cancel", finishesOnCancel: false)
    queue.add(ignoring)
    #expect(await ignoring.startedLatch.opened())
    let (waiter, newer) = Self.drainedCallThenCancelAndAdd(to: queue, reading: calls)
    #expect(await newer.startedLatch.opened())
    await onThread { ignoring.finish() }
    #expect(await waiter.value == [])
    newer.finish()
    await queue.drained()
    #expect(calls.value == [[]])
  }
}
