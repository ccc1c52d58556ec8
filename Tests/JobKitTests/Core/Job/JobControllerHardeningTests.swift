import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A `BlockOperation` whose `completionBlock` getter waits (up to 100 ms) until two threads are
/// inside it at once: it makes the window of two jobs wrapping the block at the same moment wide,
/// so a lost wrapper shows on every attempt instead of 7% of them.
private final class RendezvousOperation: BlockOperation, @unchecked Sendable {
  // @unchecked Sendable: `readers` is a lock-protected counter; the rest is Foundation's.
  private let readers = Locked(0)

  override var completionBlock: (@Sendable () -> Void)? {
    get {
      readers.mutate { $0 += 1 }
      let deadline = ContinuousClock.now + .milliseconds(100)
      while readers.value < 2, ContinuousClock.now < deadline {
        sched_yield()
      }
      return super.completionBlock
    }
    set { super.completionBlock = newValue }
  }
}

/// A job that records whether its callbacks ran, and whether the queue started it cancelled.
private final class CallbackRecordingJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `log` is thread-safe; `forcedCancel` is set before the job is queued.
  let log = EventLog()
  var forcedCancel = false
  let tasksBeforeStart: [Operation]

  init(tasksBeforeStart: [Operation] = []) {
    self.tasksBeforeStart = tasksBeforeStart
    super.init()
  }

  /// Lets a test start the job "cancelled" without `cancel()` having run, which is what a worker
  /// sees when `cancel()` races the queue's start: `isCancelled` is already `true`, the job's
  /// own bookkeeping of the cancel has not happened yet.
  override var isCancelled: Bool { forcedCancel || super.isCancelled }

  override func main() { log.record("main") }
  override func taskFinished(_ task: Operation) { log.record("taskFinished") }
  override func taskGroupFinished(_ group: Operation.Type) { log.record("group") }
  override func allTasksFinished() { log.record("all(cancelled: \(isCancelled))") }
}

/// A job that tracks `refills` more tasks from its `allTasksFinished()`, one at a time.
private final class RefillingJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `remaining` is only touched by main() and callbacks, which run serially.
  private var remaining: Int

  init(refills: Int) {
    remaining = refills
    super.init()
  }

  override func main() { trackAndQueue(InstantTask()) }

  override func allTasksFinished() {
    guard remaining > 0 else { return }
    remaining -= 1
    trackAndQueue(InstantTask())
  }
}

@Suite("JobController hardening: the issue 15 defects stay fixed")
struct JobControllerHardeningTests {
  /// Defect 1: two jobs wrapping one plain operation's completionBlock at the same moment must
  /// both route it (each used to keep only its own wrapper: one job hung).
  @Test func twoJobsTrackingOnePlainOperationAtOnceBothRouteIt() async {
    for _ in 0..<10 {
      let shared = RendezvousOperation {}
      let routedBy = Locked<[String]>([])
      let tracked = (Latch(), Latch())
      let first = ScriptedJob { job in
        job.track(shared) { _ in routedBy.mutate { $0.append("first") } }
        tracked.0.open()
      }
      let second = ScriptedJob { job in
        job.track(shared) { _ in routedBy.mutate { $0.append("second") } }
        tracked.1.open()
      }
      first.startJob()
      second.startJob()
      #expect(await tracked.0.waitOpen())
      #expect(await tracked.1.waitOpen())
      OperationQueue().addOperation(shared)
      #expect(await first.finishedSoon())
      #expect(await second.finishedSoon())
      #expect(routedBy.value.sorted() == ["first", "second"])
    }
  }

  /// The user's own completionBlock still runs exactly once, before the jobs' callbacks.
  @Test func aSharedPlainOperationsOwnCompletionBlockRunsOnce() async throws {
    for _ in 0..<10 {
      let shared = RendezvousOperation {}
      let ownRuns = Locked(0)
      shared.completionBlock = { ownRuns.mutate { $0 += 1 } }
      let tracked = [Latch(), Latch()]
      let jobs = tracked.map { latch in
        ScriptedJob { job in
          job.track(shared) { _ in #expect(ownRuns.value == 1) }
          latch.open()
        }
      }
      for job in jobs { job.startJob() }
      for latch in tracked { #expect(await latch.waitOpen()) }
      OperationQueue().addOperation(shared)
      for job in jobs {
        #expect(await job.finishedSoon())
      }
      #expect(ownRuns.value == 1)
    }
  }

  /// Two jobs both asked to queue one task: Foundation would stop the process on the second
  /// `addOperation`, so the second job reports it and only observes the task.
  @Test(arguments: [false, true])
  func twoJobsQueueingOneTaskQueueItOnceAndBothRouteIt(plain: Bool) async {
    // The plain operation cannot run before `release` ran: a dependency holds it back instead of a
    // wait in its body, which would block a worker thread the test's own async code needs.
    let release = BlockOperation {}
    let manual = ManualTask("shared")
    let shared: Operation = plain ? BlockOperation {} : manual
    if plain { shared.addDependency(release) }
    let routed = Locked(0)
    let firstTracked = Latch()
    let first = ScriptedJob { job in
      job.trackAndQueue(shared) { _ in routed.mutate { $0 += 1 } }
      firstTracked.open()
    }
    let second = ScriptedJob { job in
      job.trackAndQueue(shared) { _ in routed.mutate { $0 += 1 } }
    }
    QuietMisuse.silence(second)
    first.startJob()
    // The second job starts once the first tracked the task (awaited here, not waited for in
    // its script on a queue's thread).
    #expect(await firstTracked.waitOpen())
    second.startJob()
    #expect(await eventually { second.misuses.count == 1 })
    OperationQueue().addOperation(release)
    if !plain {
      #expect(await manual.startedLatch.waitOpen())
      manual.finish()
    }
    #expect(await first.finishedSoon())
    #expect(await second.finishedSoon())
    #expect(routed.value == 2)
    #expect(first.misuses.isEmpty)
    #expect(second.misuses.map(\.code) == [.taskAlreadyQueued])
  }

  /// Defect 2: a failed attempt gives its group slot back, so the retry can run.
  @Test func aRetriedTaskInALimitedGroupGetsTheSlotBack() async throws {
    let clock = ManualClock()
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let routed = Locked<[Int]>([])
    let mainReturned = Latch()
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(1, forGroup: FlakyTask.self)
      job.trackAndQueue(retrying: RetryPolicy(maxAttempts: 3, jitter: false)) {
        FlakyTask(attempt: $0, failingAttempts: [1], log: log)
      } completion: { task in
        routed.mutate { $0.append(task.attempt) }
      }
      job.trackAndQueue(FlakyTask(attempt: 10, failingAttempts: [], log: log)) { task in
        routed.mutate { $0.append(task.attempt) }
      }
      mainReturned.open()
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))
    // Attempt 1 can fail, and its retry delay be scheduled, before main() tracked task 10: end
    // the delay only once task 10 waits for the slot (else attempt 2 may rightly take it first).
    #expect(await mainReturned.waitOpen())
    clock.advance(by: .milliseconds(100))
    try await job.run()
    // Attempt 1 failed and gave the slot to the waiting task 10; attempt 2 queued behind it.
    #expect(log.value.map(\.attempt) == [1, 10, 2])
    #expect(routed.value == [10, 2])
    #expect(job.failures.isEmpty)
  }

  /// Defect 3: an unused timeout no longer keeps a finished job alive until it would have fired.
  @Test func aFinishedJobIsFreedAlthoughItsUnusedTimeoutWasLong() async throws {
    let tracker = ReleaseTracker()
    do {
      let quick = InstantTask("quick")
      let job = ScriptedJob { job in job.trackAndQueue(quick, timeout: .seconds(600)) { _ in } }
      tracker.watch(job, "job")
      tracker.watch(quick, "task")
      try await job.run()
    }
    #expect(await tracker.survivors(waitingUpTo: .seconds(10)) == [])
  }

  /// Defects 4 and 5: a parent that read its progress ends at exactly 1.0, whatever its nested
  /// jobs did, and a nested job refilling itself many times cannot trap in `Progress`.
  @Test(arguments: [1, 150])
  func aParentsProgressEndsCompleteWhateverItsNestedJobsDid(refills: Int) async throws {
    let parent = ScriptedJob { job in
      _ = job.fractionCompleted
      job.trackAndQueue(RefillingJob(refills: refills))
      job.trackAndQueue(RefillingJob(refills: refills))
    }
    _ = parent.progress
    try await parent.run()
    #expect(parent.fractionCompleted == 1)
    #expect(parent.progress.fractionCompleted == 1)
    #expect(parent.progress.completedUnitCount == parent.progress.totalUnitCount)
  }

  /// Defect 6: reading `progress` for the first time while nested jobs finish is race-free (the
  /// ThreadSanitizer run of this suite is the check).
  @Test func firstProgressReadRacingNestedJobsIsSafe() async throws {
    for _ in 0..<50 {
      let ready = Latch()
      let parent = ScriptedJob { job in
        for _ in 0..<4 { job.trackAndQueue(RefillingJob(refills: 3)) }
        ready.open()
      }
      parent.startJob()
      #expect(await ready.waitOpen())
      _ = parent.progress
      _ = parent.fractionCompleted
      try await parent.run()
      #expect(parent.fractionCompleted == 1)
    }
  }

  /// Defect 7: a job the queue starts while it is cancelled runs no callback, even when the
  /// job's own bookkeeping of the cancel has not happened yet.
  @Test func aJobStartedCancelledRunsNoCallbackWhateverTheOrder() async {
    let before = ManualTask("tracked before the start")
    let job = CallbackRecordingJob()
    job.track(before)
    job.forcedCancel = true
    job.startJob()
    // The job's stop cancels the task it tracked; it was never queued, so starting it finishes it.
    let taskWasCancelled = await eventually { before.isCancelled }
    #expect(taskWasCancelled)
    before.start()
    if !taskWasCancelled { before.finish() }
    await #expect(throws: CancellationError.self) { try await job.waitForFinish() }
    #expect(job.log.all.isEmpty)
  }

  /// Defect 7, as users hit it: cancel right after queueing a job that waits for a dependency.
  @Test func cancellingAQueuedJobBeforeItStartsRunsNoCallback() async {
    let queue = OperationQueue()
    var jobs: [CallbackRecordingJob] = []
    for _ in 0..<2_000 {
      let job = CallbackRecordingJob()
      job.addDependency(BlockOperation {})
      queue.addOperation(job)
      job.cancel()
      jobs.append(job)
    }
    for job in jobs {
      #expect(await job.finishedSoon(within: 30))
    }
    #expect(jobs.allSatisfy { $0.log.all.isEmpty })
  }
}
