import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job whose `main()` runs a closure and whose per-task callback is counted per task.
private final class SuspendJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable; `routed` is a `Locked`.
  let body: @Sendable (SuspendJob) -> Void
  let routed = Locked<[ObjectIdentifier: Int]>([:])

  init(taskQueue: OperationQueue? = nil, _ body: @escaping @Sendable (SuspendJob) -> Void) {
    self.body = body
    if let taskQueue { super.init(taskQueue: taskQueue) } else { super.init() }
  }

  override func main() { body(self) }
  override func taskFinished(_ task: Operation) {
    routed.mutate { $0[ObjectIdentifier(task), default: 0] += 1 }
  }
  func routedCount(_ task: Operation) -> Int { routed.value[ObjectIdentifier(task)] ?? 0 }
}

/// A task that opts in to pausing: it records every suspend and resume it is told.
private final class PausableTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `log` is thread-safe.
  let log = EventLog()
  override func operationStart() { log.record("start") }
  override func suspend() {
    super.suspend()
    log.record("suspend \(isSuspended)")
  }
  override func resume() {
    super.resume()
    log.record("resume \(isSuspended)")
  }
}

/// `suspend()` / `resume()` / `isSuspended` on ``ConcurrentOperation`` and ``JobController``
/// (issue 20, item 2), modelled on CompositeOperations' `COOperation_Suspending_Tests`
/// (`test_suspend_whenNotRunning`) and its composite specs ("Suspends composite operation and all
/// suboperations", the concurrent composite suspended from a sub-operation and resumed).
@Suite("Suspend: ConcurrentOperation and JobController", .timeLimit(.minutes(2)))
struct SuspendTests {
  // MARK: ConcurrentOperation

  /// `test_suspend_whenNotRunning`: a suspended operation its queue starts waits, holding its
  /// slot, and runs at `resume()`.
  @Test func aSuspendedOperationStartedByItsQueueRunsAtTheResume() async {
    let task = ManualTask("deferred")
    task.suspend()
    #expect(task.isSuspended)
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let behind = InstantTask()
    queue.addOperation(task)
    queue.addOperation(behind)
    #expect(await eventually { task.isExecuting })
    #expect(!task.didStart && !behind.isFinished)  // it holds the queue's only slot
    task.resume()
    #expect(task.didStart && !task.isSuspended)  // run by `resume()`, before it returned
    task.finish()
    #expect(await behind.finishedSoon())
  }

  @Test func aCancelFinishesASuspendedOperationWithoutRunningIt() async {
    let task = ManualTask("deferred")
    task.suspend()
    let queue = OperationQueue()
    queue.addOperation(task)
    #expect(await eventually { task.isExecuting })
    task.cancel()
    #expect(await task.finishedSoon())
    #expect(!task.didStart && !task.isSuspended && task.error == nil)
    task.resume()  // a no-op now
    #expect(!task.didStart)
  }

  @Test(arguments: [false, true])
  func suspendDoesNothingOnAFinishedOrCancelledOperation(cancelled: Bool) async {
    let task = InstantTask()
    if cancelled {
      task.cancel()
    } else {
      OperationQueue().addOperation(task)
      #expect(await task.finishedSoon())
    }
    task.suspend()
    #expect(!task.isSuspended)
    task.resume()
    #expect(!task.isSuspended)
  }

  @Test func aRunningSubclassIsToldAndMayPause() async {
    let task = PausableTask()
    OperationQueue().addOperation(task)
    #expect(await eventually { task.log.all.contains("start") })
    task.suspend()
    task.suspend()  // idempotent: told again, nothing changes
    task.resume()
    #expect(task.log.all == ["start", "suspend true", "suspend true", "resume false"])
    #expect(!task.isFinished)
    task.operationDone()
  }

  // MARK: JobController

  /// The concurrent composite's spec: suspended from a sub-operation's callback, later steps
  /// wait; `resume()` continues where it stopped.
  @Test func tasksTrackedWhileSuspendedWaitAndResumeQueuesThem() async {
    let first = ManualTask("first")
    let second = ManualTask("second")
    let firstRouted = Latch()
    let job = SuspendJob { job in
      job.trackAndQueue(first) { _ in
        job.suspend()
        job.trackAndQueue(second)
        firstRouted.open()
      }
    }
    job.startJob()
    #expect(await first.startedLatch.opened())
    first.finish()
    #expect(await firstRouted.opened())
    // Tracked but held back: not in the queue, not started, and the job waits for it.
    #expect(job.isSuspended && !job.taskQueue.operations.contains(second) && !second.didStart)
    #expect(!job.isFinished)
    job.resume()
    #expect(await second.startedLatch.opened())
    second.finish()
    #expect(await job.finishedSoon())
    #expect(job.routedCount(second) == 1 && job.error == nil)
  }

  @Test func runningTasksGoOnAndTheirCallbacksAreDelivered() async {
    let running = ManualTask("running")
    let job = SuspendJob { job in job.trackAndQueue(running) }
    job.startJob()
    #expect(await running.startedLatch.opened())
    job.suspend()
    running.finish()
    #expect(await eventually { job.routedCount(running) == 1 })
    // Nothing waits: the suspended job finishes.
    #expect(await job.finishedSoon())
  }

  /// "Suspends composite operation and all suboperations": the children are suspended before
  /// `suspend()` returns, and resumed by `resume()`.
  @Test func suspendingAJobSuspendsItsChildren() async {
    let child = ManualTask("child")
    let grandchild = ManualTask("grandchild")
    let nested = SuspendJob { nested in nested.trackAndQueue(grandchild) }
    let job = SuspendJob { job in
      job.trackAndQueue(child)
      job.trackAndQueue(nested)
    }
    job.startJob()
    #expect(await child.startedLatch.opened())
    #expect(await grandchild.startedLatch.opened())
    job.suspend()
    #expect(child.isSuspended && nested.isSuspended && grandchild.isSuspended)
    job.resume()
    #expect(!child.isSuspended && !nested.isSuspended && !grandchild.isSuspended)
    child.finish()
    grandchild.finish()
    #expect(await job.finishedSoon())
  }

  /// The children are suspended before `suspend()` returns even while another thread is inside
  /// one of the job's callbacks (the drainer, busy for as long as the callback runs): telling
  /// them is not drainer work (ARCHITECTURE.md, "Two elections per job").
  @Test func theChildrenAreSuspendedBeforeSuspendReturnsWhileACallbackRuns() async {
    let child = ManualTask("child")
    let inCallback = Latch()
    let leaveCallback = Latch()
    let quick = ManualTask("quick")
    let job = ClosureJob { job in
      job.trackAndQueue(child)
      job.trackAndQueue(quick) { _ in
        inCallback.open()
        #expect(leaveCallback.wait())
      }
    }
    job.startJob()
    #expect(await child.startedLatch.waitOpen())
    #expect(await quick.startedLatch.waitOpen())
    // Finished on a thread of its own, which becomes the drainer and stays in the callback.
    Thread { quick.finish() }.start()
    #expect(await inCallback.waitOpen())
    job.suspend()
    #expect(child.isSuspended)
    leaveCallback.open()
    job.resume()
    #expect(!child.isSuspended)
    child.finish()
    #expect(await job.finishedSoon())
  }

  @Test func aQueuedChildOperationDefersItsStartUntilTheResume() async {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let first = ManualTask("first")
    let queued = ManualTask("queued")
    let bothQueued = Latch()
    let job = SuspendJob(taskQueue: queue) { job in
      job.trackAndQueue(first)
      job.trackAndQueue(queued)
      bothQueued.open()
    }
    job.startJob()
    // `first` may start before `main()` queued `queued`: a suspend then would hold `queued` back
    // in the job (a task tracked while suspended waits there) instead of deferring its start.
    #expect(await bothQueued.opened())
    #expect(await first.startedLatch.opened())
    job.suspend()
    first.finish()
    #expect(await eventually { queued.isExecuting })
    #expect(!queued.didStart)
    job.resume()
    #expect(await queued.startedLatch.opened())
    queued.finish()
    #expect(await job.finishedSoon())
  }

  @Test func aJobSuspendedBeforeItStartsRunsMainAtTheResume() async {
    let task = InstantTask()
    let mainRan = Latch()
    let job = SuspendJob { job in
      mainRan.open()
      job.trackAndQueue(task)
    }
    job.suspend()
    job.startJob()
    #expect(await eventually { job.isExecuting })
    #expect(!mainRan.opened)
    job.resume()
    #expect(mainRan.opened)
    #expect(await job.finishedSoon())
    #expect(job.routedCount(task) == 1)
  }

  @Test(arguments: [false, true])
  func suspendDoesNothingOnAFinishedOrCancelledJob(cancelled: Bool) async {
    let job = SuspendJob { _ in }
    if cancelled {
      job.cancel()
    } else {
      job.startJob()
      #expect(await job.finishedSoon())
    }
    job.suspend()
    #expect(!job.isSuspended)
  }

  @Test func cancelWhileSuspendedFinishesTheWaitingTasksWithoutRunningThem() async {
    let running = ManualTask("running", finishesOnCancel: true)
    let waiting = (0..<5).map { ManualTask("waiting \($0)") }
    let job = SuspendJob { job in job.trackAndQueue(running) }
    job.startJob()
    #expect(await running.startedLatch.opened())
    job.suspend()
    for task in waiting { job.trackAndQueue(task) }
    job.cancel()
    #expect(await job.finishedSoon())
    #expect(job.isCancelled && !job.isSuspended)
    #expect(waiting.allSatisfy { $0.isFinished && $0.isCancelled && !$0.didStart })
    #expect(waiting.allSatisfy { job.routedCount($0) == 0 })  // a stopped job skips callbacks
  }

  @Test(arguments: [false, true])
  func aStopWhileTheStartWaitsForTheResumeFinishesTheJob(failing: Bool) async {
    let mainRan = Latch()
    let job = SuspendJob { _ in mainRan.open() }
    job.suspend()
    job.startJob()
    #expect(await eventually { job.isExecuting })
    if failing {
      job.fail(TestError(1))
    } else {
      job.cancel()
    }
    #expect(await job.finishedSoon())
    #expect(!mainRan.opened && !job.isSuspended)
    #expect(failing ? (job.error as? TestError) == TestError(1) : job.isCancelled)
  }

  /// A fail before the start makes a later `suspend()` a no-op, as a cancel does: the job (or
  /// group) finishes, failed, when its queue starts it, without running `main()`.
  @Test(arguments: [false, true])
  func aFailBeforeTheStartMakesALaterSuspendANoOp(group: Bool) async {
    let mainRan = Latch()
    let job: JobController =
      group ? SequentialGroup([BlockTask { mainRan.open() }]) : SuspendJob { _ in mainRan.open() }
    job.fail(TestError(2))
    job.suspend()
    #expect(!job.isSuspended)
    job.startJob()
    #expect(await job.finishedSoon())
    #expect(!mainRan.opened && !job.isSuspended && !job.isExecuting)
    #expect((job.error as? TestError) == TestError(2) || (job.error as? JobFailures) != nil)
  }

  /// A fail racing a suspend and a deferred start: whichever comes first, the job finishes.
  @Test func aFailRacingASuspendAndTheStartFinishesTheJob() async {
    let jobs = (0..<200).map { _ in SuspendJob { _ in } }
    await concurrently(jobs.count * 2, barrier: true) { index in
      let job = jobs[index / 2]
      if index % 2 == 0 {
        job.fail(TestError(3))
      } else {
        job.suspend()
        job.startJob()
      }
    }
    #expect(await eventually { jobs.allSatisfy(\.isFinished) })
    #expect(jobs.allSatisfy { ($0.error as? TestError) == TestError(3) && !$0.isSuspended })
  }

  @Test func limitsAreRespectedAfterTheResume() async {
    let running = Locked<(now: Int, max: Int, order: [Int])>((0, 0, []))
    let tasks = (0..<12).map { GatedTask($0, running: running) }
    let tracked = Latch()
    let job = SuspendJob { job in
      job.setMaxConcurrentTasks(2, forGroup: GatedTask.self)
      job.suspend()
      for task in tasks { job.trackAndQueue(task) }
      tracked.open()
    }
    job.startJob()
    #expect(await tracked.opened())
    #expect(running.value.order.isEmpty)
    job.resume()
    #expect(await job.finishedSoon())
    // Admitted in order (SuspensionStateTests check the order); two tasks queued at once may
    // start in either order on a concurrent queue, so only the set is checked here.
    #expect(running.value.max <= 2 && running.value.order.sorted() == Array(0..<12))
  }

  @Test func aRetryDueWhileSuspendedWaitsForTheResume() async {
    let clock = ManualClock()
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let job = SuspendJob { job in
      job.trackAndQueue(retrying: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: false)) { attempt in
        FlakyTask(attempt: attempt, failingAttempts: [1], log: log)
      } completion: { _ in
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))
    job.suspend()
    clock.advance(by: .seconds(1))
    // The delay ended: attempt 2 is made and tracked, and waits for the resume.
    #expect(log.value.map(\.attempt) == [1] && !job.isFinished)
    job.resume()
    #expect(await job.finishedSoon())
    #expect(log.value.map(\.attempt) == [1, 2] && job.failures.isEmpty)
  }

  /// The documented choice: a timeout keeps running while the job is suspended.
  @Test func aRunningTasksTimeoutKeepsRunningWhileSuspended() async {
    let clock = ManualClock()
    let task = ManualTask("slow", finishesOnCancel: true)
    let job = SuspendJob { job in job.trackAndQueue(task, timeout: .seconds(5)) }
    job.clock = clock
    job.startJob()
    #expect(await task.startedLatch.opened())
    #expect(await clock.waitForScheduled(1))
    job.suspend()
    clock.advance(by: .seconds(5))
    #expect(await job.finishedSoon())
    #expect(task.isCancelled && job.failures.count == 1)
  }
}
