import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// swift-corelibs-foundation's own `TestOperationQueue` cases (`Tests/Foundation/TestOperationQueue.swift`),
/// restated for the tasks a job starts itself while the queue it made for itself is private (see
/// `OwnQueueFlag`). Each test checks what the corelibs case checks of an `OperationQueue`'s
/// operations; where that depends on the queue, it checks what <doc:RoutingAndThreads> ("The task
/// queue") promises: the documented difference on the private queue, or the queue's own
/// behaviour once it is handed out (`CorelibsOperationQueueCasesQueueTests`).
///
/// Cases on the operations (this suite; the fast path is checked to be in play):
/// - `test_isExecutingWorks`: `isExecutingWhileTheBodyRuns`.
/// - `test_AsyncOperation`: `anAsynchronousTaskExecutesUntilItIsDone` (a `ConcurrentOperation`).
/// - `test_SyncOperationWithoutAQueue`, `test_BlockOperationAddExecutionBlock`:
///   `plainOperationsGoThroughTheQueue` (a plain `Operation` is never started directly).
/// - `test_CancelOutOfQueue`: `aTaskCancelledBeforeItsJobStartsItNeverRuns`.
/// - `test_CancelOneOperation`, `test_CancelOperationsOfSpecificQueuePriority`:
///   `cancellingWaitingTasksSkipsThem` (waiting behind a job's limit of 1, the private queue has
///   no serial mode).
/// - `test_CancelDependency`: `aCancelledDependencyReleasesItsDependent`.
/// - `test_Deadlock`, `test_Lifecycle`: `aJobNobodyHoldsRunsDependentTasksAndIsFreed`.
/// - `test_CrossQueueDependency`: `dependenciesAcrossQueues` (both directions).
/// - `test_ExecutionOrder`, `test_OperationDependencyCount`: `aDependencyRunsBeforeItsDependent`.
/// - `test_CustomOperationReady` (skipped upstream as flaky): `aCustomReadinessHoldsTheTaskBack`.
/// - `test_DependencyCycleBreak`: `cancellingATaskBreaksADependencyCycle`.
/// - `test_OperationWaitUntilFinished`: `waitUntilFinishedReturnsOnceTheTaskFinished`.
/// - `test_ConcurrentOperations`, `test_ConcurrentOperationsWithDependenciesAndCompletions`:
///   `tasksRunAtOnceUnderALimitOfTwo` (with `completionBlock`).
///
/// Cases on the queue (`CorelibsOperationQueueCasesQueueTests`): `test_OperationCount`,
/// `test_OperationPriorities`, `test_OperationOrder`, `test_OperationOrder2`,
/// `test_CurrentQueueOnBackgroundQueue`, `test_CurrentQueueOnBackgroundQueueWithSelfCancel`,
/// `test_CurrentQueueWithCustomUnderlyingQueue`, `test_CurrentQueueWithUnderlyingQueueResetToNil`,
/// `test_isSuspended`, `test_CancelWhileSuspended`, `test_WaitUntilFinished`; there each test's
/// comment names its case. `aTaskStartedBeforeAHandOutStaysOutOfTheQueue` checks what a queue
/// handed out mid-run does not reach (`operations`, `waitUntilAllOperationsAreFinished()`,
/// `cancelAllOperations()`, `maxConcurrentOperationCount`), as documented.
///
/// Not applicable: `test_MainQueueGetter` and `test_CurrentQueueOnMainQueue` (`OperationQueue.main`,
/// which no job uses).
@Suite("corelibs OperationQueue cases: operations", .timeLimit(.minutes(3)))
struct CorelibsOperationQueueCasesTests {
  @Test func isExecutingWhileTheBodyRuns() async throws {
    let box = Locked<BlockTask?>(nil)
    // isExecuting, !isFinished, no current queue (started by the job itself).
    let seen = Locked<[Bool]>([])
    let task = BlockTask {
      let task = box.value
      seen.mutate { $0 = [task?.isExecuting == true, task?.isFinished == false, OperationQueue.current == nil] }
    }
    box.mutate { $0 = task }
    #expect(!task.isExecuting && !task.isFinished)
    let job = CorelibsCaseJob { $0.trackAndQueue(task) }
    #expect(await job.runs())
    box.mutate { $0 = nil }
    #expect(seen.value == [true, true, true])
    #expect(!task.isExecuting && task.isFinished)
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  @Test func anAsynchronousTaskExecutesUntilItIsDone() async throws {
    let task = ManualTask("async")
    #expect(!task.isExecuting && !task.isFinished)
    let job = CorelibsCaseJob { $0.trackAndQueue(task) }
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    #expect(task.isExecuting && !task.isFinished)
    #expect(!job.queueOfTasks.operations.contains(task))
    task.finish()
    #expect(await eventually { job.isFinished })
    #expect(!task.isExecuting && task.isFinished)
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  /// A plain `Operation` (a synchronous subclass, a `BlockOperation` of two blocks) runs as on any
  /// queue, through the job's queue, which it hands out: a `BlockTask` after it runs there too.
  @Test func plainOperationsGoThroughTheQueue() async throws {
    let sync = SyncOperation()
    let blocks = Locked<Set<Int>>([])
    let block = BlockOperation { blocks.mutate { _ = $0.insert(1) } }
    block.addExecutionBlock { blocks.mutate { _ = $0.insert(2) } }
    #expect(block.executionBlocks.count == 2)
    let current = Locked<OperationQueue?>(nil)
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(sync)
      job.trackAndQueue(block)
      job.trackAndQueue(BlockTask { current.mutate { $0 = OperationQueue.current } })
    }
    #expect(await job.runs())
    #expect(sync.hasRun.value && sync.isFinished && !sync.isExecuting)
    #expect(blocks.value == [1, 2])
    #expect(job.ownQueueFlag?.isExposed == true)
    #expect(current.value === job.queueOfTasks)
  }

  @Test func aTaskCancelledBeforeItsJobStartsItNeverRuns() async throws {
    let ran = Locked(false)
    let task = BlockTask { ran.mutate { $0 = true } }
    task.cancel()
    #expect(task.isCancelled && !task.isExecuting && !task.isFinished)
    let job = CorelibsCaseJob { $0.trackAndQueue(task) }
    #expect(await job.runs())
    #expect(task.isCancelled && !task.isExecuting && task.isFinished)
    #expect(!ran.value)
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  /// Five tasks (corelibs' priorities: two high, then normal) wait behind a limit of one; those
  /// cancelled while waiting finish without running, the others run in tracking order (a job's
  /// limit keeps that order, see `setMaxConcurrentTasks`).
  @Test(arguments: [[2], [2, 3, 4]])
  func cancellingWaitingTasksSkipsThem(cancelled: [Int]) async throws {
    let ran = Locked<[Int]>([])
    let release = Latch()
    let tasks = (0..<5).map { index in
      BlockTask(async: {
        ran.mutate { $0.append(index) }
        if index == 0 { _ = await release.waitOpen() }
      })
    }
    for (index, task) in tasks.enumerated() { task.queuePriority = index < 2 ? .high : .normal }
    let job = CorelibsCaseJob { job in
      job.setMaxConcurrentTasks(1, forGroup: BlockTask.self)
      for task in tasks { job.trackAndQueue(task) }
    }
    job.startJob()
    #expect(await eventually { ran.value == [0] })
    for index in cancelled { tasks[index].cancel() }
    release.open()
    #expect(await eventually { job.isFinished })
    #expect(ran.value == (0..<5).filter { !cancelled.contains($0) })
    for index in cancelled {
      #expect(tasks[index].isCancelled && tasks[index].isFinished && !tasks[index].isExecuting)
    }
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  @Test func aCancelledDependencyReleasesItsDependent() async throws {
    let log = EventLog()
    let first = BlockTask { log.record("first") }
    let second = BlockTask { log.record("second") }
    second.addDependency(first)
    first.cancel()
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(first)
      job.trackAndQueue(second)
    }
    #expect(await job.runs())
    #expect(log.all == ["second"])
    #expect(first.isCancelled && first.isFinished)
    #expect(second.isFinished && !second.isCancelled)
  }

  /// A job nobody holds, of a task that depends on another which is cancelled while it runs:
  /// both run to their end, in dependency order, and the job and its queue are freed.
  @Test func aJobNobodyHoldsRunsDependentTasksAndIsFreed() async throws {
    let log = EventLog()
    let started = Latch()
    let proceed = Latch()
    let done = Latch()
    let running = Locked<BlockTask?>(nil)
    let references: [WeakRef] = {
      let second = BlockTask(async: {
        started.open()
        _ = await proceed.waitOpen()
        log.record("second")
      })
      let first = BlockTask {
        log.record("first")
        done.open()
      }
      first.addDependency(second)
      running.mutate { $0 = second }
      let job = CorelibsCaseJob { job in
        job.trackAndQueue(first)
        job.trackAndQueue(second)
      }
      job.startJob()
      return [WeakRef(job, "job"), WeakRef(job.queueOfTasks, "queue"), WeakRef(first, "first")]
    }()
    #expect(await started.waitOpen())
    running.mutate { $0?.cancel() }
    #expect(running.value?.isCancelled == true)
    running.mutate { $0 = nil }
    proceed.open()
    #expect(await done.waitOpen())
    #expect(log.all == ["second", "first"])
    #expect(await eventually { references.allSatisfy { $0.object == nil } })
  }

  /// A task the job queues waits for an operation of another queue (it goes to the job's queue,
  /// not ready), and an operation of another queue waits for a task the job started itself.
  /// `waiting` is tracked (from outside `main()`, which the running `source` keeps the job from
  /// finishing) once `source` started: both are handed to worker threads, and a `waiting` whose
  /// worker reached the queue first would expose it, sending `source` through the queue as well
  /// (still correct, but not the case under test).
  @Test func dependenciesAcrossQueues() async throws {
    let log = EventLog()
    let other = OperationQueue()
    let gate = ManualTask("gate")
    let waiting = BlockTask { log.record("waiting") }
    waiting.addDependency(gate)
    let source = ManualTask("source")
    let dependent = BlockOperation { log.record("dependent") }
    dependent.addDependency(source)
    other.addOperation(gate)
    other.addOperation(dependent)
    let job = CorelibsCaseJob { $0.trackAndQueue(source) }
    job.startJob()
    #expect(await source.startedLatch.waitOpen())
    job.trackAndQueue(waiting)
    #expect(await gate.startedLatch.waitOpen())
    #expect(await eventually { job.queueOfTasks.operations.contains(waiting) })
    #expect(!job.queueOfTasks.operations.contains(source))
    source.finish()
    #expect(await eventually { dependent.isFinished })
    #expect(log.all == ["dependent"])
    gate.finish()
    #expect(await eventually { job.isFinished })
    #expect(log.all == ["dependent", "waiting"])
  }

  @Test func aDependencyRunsBeforeItsDependent() async throws {
    let log = EventLog()
    let release = Latch()
    let dependency = BlockTask(async: {
      _ = await release.waitOpen()
      log.record("dependency")
    })
    let dependent = BlockTask { log.record("dependent") }
    let other = BlockTask { log.record("other") }
    dependent.addDependency(dependency)
    #expect(dependent.dependencies.count == 1)
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(dependent)
      job.trackAndQueue(dependency)
      job.trackAndQueue(other)
    }
    job.startJob()
    // Not ready when the job would start it: it waits in the queue.
    #expect(await eventually { job.queueOfTasks.operations.contains(dependent) })
    release.open()
    #expect(await eventually { job.isFinished })
    let order = log.all
    #expect(Set(order) == ["dependency", "dependent", "other"])
    #expect((order.firstIndex(of: "dependency") ?? 3) < (order.firstIndex(of: "dependent") ?? 0))
  }

  /// A `ConcurrentOperation` whose own `isReady` is false waits in the queue until it posts its
  /// readiness change; a ready task beside it runs meanwhile.
  @Test func aCustomReadinessHoldsTheTaskBack() async throws {
    let gated = GatedOperation()
    let other = BlockTask {}
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(gated)
      job.trackAndQueue(other)
    }
    job.startJob()
    #expect(await eventually { other.isFinished })
    #expect(await eventually { job.queueOfTasks.operationCount == 1 })
    #expect(!gated.ran.value && !gated.isExecuting && !gated.isFinished)
    gated.makeReady()
    #expect(await eventually { job.isFinished })
    #expect(gated.ran.value)
    #expect(job.queueOfTasks.operationCount == 0)
  }

  /// Three tasks depending on each other in a cycle, tracked, then the third cancelled: it
  /// finishes without running, the second runs after its cancel, the first after the second.
  @Test func cancellingATaskBreaksADependencyCycle() async throws {
    let log = EventLog()
    let cycle = Locked<[BlockTask]>([])
    let first = BlockTask { log.record(cycle.value[1].isFinished ? "first after second" : "first") }
    let second = BlockTask { log.record(cycle.value[2].isCancelled ? "second after the cancel" : "second") }
    let third = BlockTask { log.record("third") }
    cycle.mutate { $0 = [first, second, third] }
    first.addDependency(second)
    second.addDependency(third)
    third.addDependency(first)
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(first)
      job.trackAndQueue(second)
      job.trackAndQueue(third)
      third.cancel()
    }
    #expect(await job.runs())
    #expect(log.all == ["second after the cancel", "first after second"])
    #expect(third.isCancelled && third.isFinished)
    third.removeDependency(first)
    cycle.mutate { $0 = [] }
  }

  /// `waitUntilFinished()` returns once the task finished; the task, started by the job itself,
  /// is never one of the queue's operations (the documented difference).
  @Test func waitUntilFinishedReturnsOnceTheTaskFinished() async throws {
    let task = ManualTask("waited")
    let job = CorelibsCaseJob { $0.trackAndQueue(task) }
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    #expect(job.queueOfTasks.operationCount == 0)
    let finishedAtReturn = Locked<Bool?>(nil)
    let returned = Latch()
    Thread {
      task.waitUntilFinished()
      finishedAtReturn.mutate { $0 = task.isFinished }
      returned.open()
    }.start()
    // It would return within this bounded wait if it did not wait for the task.
    #expect(await !eventually(within: .milliseconds(200)) { returned.opened })
    task.finish()
    #expect(await returned.waitOpen())
    #expect(finishedAtReturn.value == true)
    #expect(await eventually { job.isFinished })
    #expect(job.queueOfTasks.operationCount == 0)
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  /// Three rounds of a task that waits until two others ran, under a limit of two tasks at once
  /// (corelibs' `maxConcurrentOperationCount = 2`); the first one's `completionBlock` runs.
  @Test func tasksRunAtOnceUnderALimitOfTwo() async throws {
    for _ in 0..<3 {
      let secondRan = Latch()
      let thirdRan = Latch()
      let completion = Latch()
      let waited = Locked<[Bool]>([])
      let first = BlockTask(async: {
        let second = await secondRan.waitOpen()
        let third = await thirdRan.waitOpen()
        waited.mutate { $0 = [second, third] }
      })
      first.completionBlock = { completion.open() }
      let job = CorelibsCaseJob { job in
        job.setMaxConcurrentTasks(2, forGroup: BlockTask.self)
        job.trackAndQueue(first)
        job.trackAndQueue(BlockTask { secondRan.open() })
        job.trackAndQueue(BlockTask { thirdRan.open() })
      }
      #expect(await job.runs())
      #expect(waited.value == [true, true])
      #expect(await completion.waitOpen())
      #expect(job.ownQueueFlag?.isExposed == false)
    }
  }
}

/// A job whose `main()` runs a closure; it reads the public `taskQueue` only if made with
/// `handOut` (before it starts) or if the closure does.
final class CorelibsCaseJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable.
  private let body: @Sendable (CorelibsCaseJob) -> Void
  init(handOut: Bool = false, _ body: @escaping @Sendable (CorelibsCaseJob) -> Void) {
    self.body = body
    super.init()
    if handOut { _ = taskQueue }
  }
  override func main() { body(self) }

  /// Starts the job and waits until it finished; `false` if it had not within 30 seconds (a
  /// hang fails the test instead of stalling the run).
  func runs() async -> Bool {
    startJob()
    return await eventually { self.isFinished }
  }
}

/// corelibs' `SyncOperation`: a plain synchronous operation.
private final class SyncOperation: Operation, @unchecked Sendable {
  // @unchecked Sendable: `hasRun` is a `Locked`.
  let hasRun = Locked(false)
  override func main() { hasRun.mutate { $0 = true } }
}

/// corelibs' `CustomOperation`, as a `ConcurrentOperation`: not ready until ``makeReady()``,
/// which posts the change as Foundation requires.
private final class GatedOperation: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: its state is in `Locked`s.
  private let gate = ReadinessGate()
  let ran = Locked(false)
  override var isReady: Bool { gate.isOpen && super.isReady }
  func makeReady() { gate.open(self) }
  override func operationStart() {
    ran.mutate { $0 = true }
    operationDone()
  }
}
