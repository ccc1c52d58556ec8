import Foundation
import Testing

@testable import JobKit

@Suite("BlockTask")
struct BlockTaskTests {
  @Test func aSyncBodyRunsOnTheThreadThatStartsIt() async throws {
    let bodyThread = Locked<ObjectIdentifier?>(nil)
    let task = BlockTask { bodyThread.mutate { $0 = ObjectIdentifier(Thread.current) } }
    let starter = await onThread { () -> ObjectIdentifier in
      task.start()
      return ObjectIdentifier(Thread.current)
    }
    #expect(bodyThread.value == starter)
    #expect(task.isFinished && task.error == nil)
  }

  @Test func aThrownErrorBecomesTheTasksError() async throws {
    let sync = BlockTask { throw TestError(1) }
    let async = BlockTask(async: { throw TestError(2) })
    let queue = OperationQueue()
    queue.addOperation(sync)
    queue.addOperation(async)
    await #expect(throws: TestError(1)) { try await sync.waitForFinish() }
    await #expect(throws: TestError(2)) { try await async.waitForFinish() }
    #expect(!sync.isCancelled && !async.isCancelled)
  }

  /// MGCommand's cancellable command: `cancel()` cancels the Swift task of an async body; the
  /// `CancellationError` it throws means "cancelled", not failed.
  @Test func cancelCancelsAnAsyncBody() async throws {
    let started = Latch()
    let task = BlockTask(async: {
      started.open()
      try await suspendUntilCancelled()
    })
    OperationQueue().addOperation(task)
    #expect(await started.opened())
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.waitForFinish() }
    #expect(task.isCancelled && task.error == nil)
  }

  /// A `CancellationError` from a body that was not cancelled cancels the task (issue 20; more
  /// in `TaskSelfCancelTests`): it is not a failure.
  @Test func aCancellationErrorWithoutACancelCancelsTheTask() async throws {
    let task = BlockTask { throw CancellationError() }
    task.start()
    #expect(task.isCancelled && task.error == nil)
  }

  /// A synchronous body cannot be interrupted: it runs to its end and the task then finishes,
  /// cancelled, without an error.
  @Test func aSyncBodyRunsToItsEndWhenCancelled() async throws {
    let inside = Latch()
    let proceed = Latch()
    let ranToEnd = Locked(false)
    let task = BlockTask {
      inside.open()
      proceed.wait()
      ranToEnd.mutate { $0 = true }
    }
    // A synchronous body runs on the starting thread: a thread of its own, not a queue's worker
    // (see `onThread`), since the body blocks until the test opens `proceed`.
    Thread { task.start() }.start()
    #expect(await inside.opened())
    task.cancel()
    #expect(!task.isFinished)
    proceed.open()
    await #expect(throws: CancellationError.self) { try await task.waitForFinish() }
    #expect(ranToEnd.value && task.error == nil)
  }

  @Test func aTaskCancelledBeforeItStartsNeverRunsItsBody() async throws {
    let ran = Locked(0)
    let tasks = [BlockTask { ran.mutate { $0 += 1 } }, BlockTask(async: { ran.mutate { $0 += 1 } })]
    for task in tasks {
      task.cancel()
      task.start()
      #expect(task.isFinished && task.isCancelled)
    }
    #expect(ran.value == 0)
  }

  /// MGCommand README: block commands, synchronous and asynchronous, in a sequence.
  @Test func blockTasksInASequence() async throws {
    let log = EventLog()
    let sequence = SequentialGroup()
    sequence.add(BlockTask { log.record("Awesome block command!") })
    sequence.add(
      BlockTask(async: {
        await Task.yield()
        log.record("async")
      }))
    sequence.add(BlockTask { log.record("And the next one!") })
    try await sequence.run()
    #expect(log.all == ["Awesome block command!", "async", "And the next one!"])
  }
}
