import Foundation
import Testing

@testable import JobKit

/// Records `onDrained` calls and lets a test wait for the n-th one.
final class DrainProbe: @unchecked Sendable {
  // @unchecked Sendable: state is in `Locked`; the semaphore is thread-safe.
  private let calls = Locked<[[TaskFailure]]>([])
  private let semaphore = DispatchSemaphore(value: 0)

  func install(on queue: CommandQueue) {
    queue.onDrained = { [self] failures in
      calls.mutate { $0.append(failures) }
      semaphore.signal()
    }
  }

  /// Waits for one more drained call; `false` on timeout.
  func waitForDrain(timeout seconds: Double = 30) -> Bool {
    semaphore.wait(timeout: .now() + seconds) == .success
  }

  /// `waitForDrain`, waiting on a thread of its own.
  func drained(timeout seconds: Double = 30) async -> Bool {
    await onThread { self.waitForDrain(timeout: seconds) }
  }

  var all: [[TaskFailure]] { calls.value }
}

@Suite("CommandQueue")
struct CommandQueueTests {
  /// MGCommand autoStartGroup: adding starts the command; commands added while one runs run after
  /// it, in order; the queue drains once.
  @Test func sequentialModeStartsOnAddAndRunsInOrder() async {
    let queue = CommandQueue(mode: .sequential)
    let drains = DrainProbe()
    drains.install(on: queue)
    let log = EventLog()
    let first = ManualTask("first")
    queue.add(first)
    #expect(await first.startedLatch.opened())
    for index in 1...3 {
      queue.add(Step("\(index)", log: log, finish: .later))
    }
    first.finish()
    #expect(await drains.drained())
    #expect(log.all == ["1", "2", "3"])
    #expect(drains.all.count == 1 && drains.all[0].isEmpty)
  }

  /// MGCommand's bug, fixed: a command added to a running concurrent queue runs, at once.
  @Test func concurrentModeStartsACommandAddedWhileOthersRun() async {
    let queue = CommandQueue(mode: .concurrent)
    let drains = DrainProbe()
    drains.install(on: queue)
    let first = ManualTask("first")
    let second = ManualTask("second")
    queue.add(first)
    #expect(await first.startedLatch.opened())
    queue.add(second)
    #expect(await second.startedLatch.opened())
    #expect(!first.isFinished)
    second.finish()
    first.finish()
    #expect(await drains.drained())
    #expect(drains.all.count == 1)
  }

  /// "completeHandler is called whenever there are no more commands": once per burst.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func drainsOncePerBurst(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let drains = DrainProbe()
    drains.install(on: queue)
    let log = EventLog()
    queue.add(Step("a", log: log, finish: .later))
    #expect(await drains.drained())
    queue.add(Step("b", log: log))
    #expect(await drains.drained())
    #expect(log.all == ["a", "b"] && drains.all.count == 2)
  }

  @Test func pauseHoldsNewCommandsUntilResume() async {
    let queue = CommandQueue(mode: .sequential)
    let drains = DrainProbe()
    drains.install(on: queue)
    let log = EventLog()
    let running = ManualTask("running")
    queue.add(running)
    #expect(await running.startedLatch.opened())
    let waiting = Step("waiting", log: log)
    queue.add(waiting)
    queue.pause()
    #expect(queue.isPaused)
    running.finish()
    #expect(await running.finishedSoon())
    queue.add(Step("added while paused", log: log))
    #expect(await !waiting.finishedSoon(within: 0.2))  // held, not started
    #expect(log.all.isEmpty && drains.all.isEmpty)
    queue.resume()
    #expect(!queue.isPaused)
    #expect(await drains.drained())
    #expect(log.all == ["waiting", "added while paused"])
  }

  @Test func pausingAnIdleQueueHoldsTheFirstCommand() async {
    let queue = CommandQueue(mode: .concurrent)
    let drains = DrainProbe()
    drains.install(on: queue)
    let log = EventLog()
    queue.pause()
    let step = Step("held", log: log)
    queue.add(step)
    #expect(await !step.finishedSoon(within: 0.2))
    queue.resume()
    #expect(await drains.drained())
    #expect(log.all == ["held"])
  }

  /// MGCommandGroup cancel: running commands are cancelled, waiting ones never run; the queue
  /// still drains, and runs commands added afterwards.
  @Test func cancelAllCancelsRunningAndWaitingCommands() async {
    let queue = CommandQueue(mode: .sequential)
    let drains = DrainProbe()
    drains.install(on: queue)
    let log = EventLog()
    let running = ManualTask("running", finishesOnCancel: true)
    let waiting = Step("waiting", log: log)
    queue.add(running)
    queue.add(waiting)
    #expect(await running.startedLatch.opened())
    queue.cancelAll()
    #expect(await running.cancelledLatch.opened())
    #expect(await drains.drained())
    #expect(waiting.isCancelled && waiting.isFinished && log.all.isEmpty)
    queue.add(Step("after", log: log))
    #expect(await drains.drained())
    #expect(log.all == ["after"])
  }

  @Test func theDrainedHandlerGetsTheFailures() async {
    let queue = CommandQueue(mode: .concurrent)
    let drains = DrainProbe()
    drains.install(on: queue)
    let gate = ManualTask()
    queue.add(gate)
    queue.add(Step("fails", log: EventLog(), failure: TestError(9)))
    #expect(await gate.startedLatch.opened())
    gate.finish()
    #expect(await drains.drained())
    #expect(drains.all.flatMap { $0 }.map { $0.error as? TestError } == [TestError(9)])
  }

  @Test func commandsShareTheQueuesContext() async {
    let queue = CommandQueue(mode: .sequential)
    let drains = DrainProbe()
    drains.install(on: queue)
    queue.add(BlockTask { $0[.foo1] = "bar1" })
    queue.add(BlockTask { context in context[.foo2] = context[.foo1].map { $0 + "+" } })
    #expect(await drains.drained())
    #expect(queue.context[.foo1] == "bar1" && queue.context[.foo2] == "bar1+")
  }

  /// Invariant: commands added from several threads while bursts start and finish all run exactly
  /// once (none lost at a burst's end), and the last drained call comes after all of them.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func addsRacingBurstEndsAreNeverLost(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let perThread = 500
    let threads = 4
    let runs = Locked([Int](repeating: 0, count: perThread * threads))
    let allDone = Latch()
    queue.onDrained = { _ in
      if runs.value.allSatisfy({ $0 == 1 }) { allDone.open() }
    }
    await concurrently(threads) { thread in
      for index in 0..<perThread {
        let id = thread * perThread + index
        let command =
          id.isMultiple(of: 3)
          ? BlockTask(async: { runs.mutate { $0[id] += 1 } }) : BlockTask { runs.mutate { $0[id] += 1 } }
        queue.add(command)
      }
    }
    #expect(await allDone.opened())
    #expect(runs.value.allSatisfy { $0 == 1 })
  }
}

@Suite("CommandQueue.drained()", .timeLimit(.minutes(1)))
struct CommandQueueDrainedTests {
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func returnsAtOnceWhenIdle(mode: CommandQueue.Mode) async {
    await CommandQueue(mode: mode).drained()
  }

  /// Busy: `drained()` returns only once every command added before it finished.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func returnsOnceEveryCommandAddedSoFarFinished(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    let first = ManualTask("first")
    let second = ManualTask("second")
    queue.add(first)
    queue.add(second)
    #expect(await first.startedLatch.opened())
    let waiter = Task { () -> Bool in
      await queue.drained()
      return first.isFinished && second.isFinished
    }
    first.finish()
    // Sequential: second starts once first finished. Concurrent: it starts on its own, maybe
    // later than first; finishing it before it started would be ignored (and it would never end).
    #expect(await second.startedLatch.opened())
    second.finish()
    #expect(await waiter.value)
    await queue.drained()  // idle again: at once
  }

  /// Cancelling the awaiting task ends the wait, not the commands.
  @Test func cancellingTheWaiterReturnsWithoutCancellingCommands() async {
    let queue = CommandQueue(mode: .sequential)
    let command = ManualTask("command")
    queue.add(command)
    #expect(await command.startedLatch.opened())
    let waiter = Task { await queue.drained() }
    waiter.cancel()
    await waiter.value
    #expect(!command.isCancelled && !command.isFinished)
    command.finish()
    await queue.drained()
  }
}
