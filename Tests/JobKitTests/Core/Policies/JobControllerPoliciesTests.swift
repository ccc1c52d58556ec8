import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task that fails on the attempts listed in `failingAttempts`, recording when it started.
final class FlakyTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `log` is thread-safe.
  let attempt: Int
  let failingAttempts: Set<Int>
  let log: Locked<[(attempt: Int, at: ContinuousClock.Instant)]>
  let finished: Latch?

  init(
    attempt: Int, failingAttempts: Set<Int>, log: Locked<[(attempt: Int, at: ContinuousClock.Instant)]>,
    finished: Latch? = nil
  ) {
    self.attempt = attempt
    self.failingAttempts = failingAttempts
    self.log = log
    self.finished = finished
  }

  override func operationStart() {
    log.mutate { $0.append((attempt, ContinuousClock.now)) }
    operationDone(error: failingAttempts.contains(attempt) ? TestError(attempt) : nil)
    finished?.open()
  }
}

/// A task that counts how many of its kind execute at once, and finishes when released.
final class GatedTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; shared counters are `Locked`.
  let index: Int
  let running: Locked<(now: Int, max: Int, order: [Int])>
  init(_ index: Int, running: Locked<(now: Int, max: Int, order: [Int])>) {
    self.index = index
    self.running = running
  }
  override func operationStart() {
    running.mutate {
      $0.now += 1
      $0.max = Swift.max($0.max, $0.now)
      $0.order.append(index)
    }
    DispatchQueue.global().async {
      self.running.mutate { $0.now -= 1 }
      self.operationDone()
    }
  }
}

@Suite("JobController failure policies, retry, timeout and limits")
struct JobControllerPoliciesTests {
  // MARK: Failure policy

  @Test func ignoreRoutesFailuresAndListsThem() async throws {
    let job = ScriptedJob { job in
      job.trackAndQueue(InstantTask("ok"))
      job.trackAndQueue(InstantTask("bad", failure: TestError(1)))
    }
    try await job.run()
    #expect(job.log.all.filter { $0 == "taskFinished" }.count == 2)
    #expect(job.failures.count == 1)
    #expect(job.failures.first?.error as? TestError == TestError(1))
    #expect(job.failures.first?.group == "InstantTask")
  }

  @Test func collectRunsToTheEndAndReportsEveryFailure() async throws {
    let job = ScriptedJob { job in
      job.failurePolicy = .collect
      for index in 0..<10 {
        job.trackAndQueue(InstantTask("\(index)", failure: index.isMultiple(of: 3) ? TestError(index) : nil))
      }
    }
    let error = await #expect(throws: JobFailures.self) { try await job.run() }
    #expect(error?.failures.count == 4)
    #expect(Set(error?.failures.compactMap { ($0.error as? TestError)?.id } ?? []) == [0, 3, 6, 9])
    #expect(job.log.all.filter { $0 == "taskFinished" }.count == 10)
    #expect(job.log.all.last == "all")
  }

  @Test func failFastFailsTheJobWithTheFirstErrorAndCancelsTheRest() async throws {
    let slow = ManualTask("slow")
    let job = ScriptedJob { job in
      job.failurePolicy = .failFast
      job.trackAndQueue(slow)
      job.trackAndQueue(InstantTask("bad", failure: TestError(9)))
    }
    await #expect(throws: TestError(9)) { try await job.run() }
    #expect(slow.isCancelled)
    #expect(job.failures.count == 1)  // the cancelled task's outcome is not a failure
    #expect(!job.log.all.contains("all"))
  }

  @Test func aFailedNestedJobIsAFailure() async throws {
    let inner = ScriptedJob { $0.fail(TestError(5)) }
    let outer = ScriptedJob { $0.trackAndQueue(inner) }
    try await outer.run()
    #expect(outer.failures.map { $0.error as? TestError } == [TestError(5)])
  }

  // MARK: Retry

  @Test func retryRunsFreshAttemptsUntilOneSucceedsAndRoutesOnlyThat() async throws {
    let clock = ManualClock()
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let routed = Locked<[Int]>([])
    let policy = RetryPolicy(maxAttempts: 5, initialDelay: .milliseconds(20), multiplier: 2, jitter: false)
    let job = ScriptedJob { job in
      job.trackAndQueue(retrying: policy, { FlakyTask(attempt: $0, failingAttempts: [1, 2], log: log) }) {
        task in routed.mutate { $0.append(task.attempt) }
      }
    }
    job.clock = clock
    job.startJob()
    // Attempt 2 waits 20 ms of the job's clock after attempt 1 failed, attempt 3 another 40 ms.
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .milliseconds(19))
    #expect(log.value.count == 1)
    clock.advance(by: .milliseconds(1))
    #expect(await clock.waitForScheduled(2))
    clock.advance(by: .milliseconds(39))
    #expect(log.value.count == 2)
    clock.advance(by: .milliseconds(1))
    try await job.run()
    #expect(log.value.map(\.attempt) == [1, 2, 3])
    #expect(routed.value == [3])
    #expect(job.failures.isEmpty)
    #expect(job.log.all == ["group", "all"])
  }

  @Test func retryGivesUpAfterMaxAttemptsAndRoutesTheLastFailure() async throws {
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let routed = Locked<[Int]>([])
    let policy = RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(1), jitter: false)
    let job = ScriptedJob { job in
      job.trackAndQueue(retrying: policy, { FlakyTask(attempt: $0, failingAttempts: [1, 2, 3, 4], log: log) }) {
        task in routed.mutate { $0.append(task.attempt) }
      }
    }
    try await job.run()
    #expect(log.value.map(\.attempt) == [1, 2, 3])
    #expect(routed.value == [3])
    #expect(job.failures.map { $0.error as? TestError } == [TestError(3)])
  }

  @Test func retryIfFalseStopsAtOnce() async throws {
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let policy = RetryPolicy(maxAttempts: 5, initialDelay: .milliseconds(1), retryIf: { _ in false })
    let job = ScriptedJob { job in
      job.trackAndQueue(retrying: policy, { FlakyTask(attempt: $0, failingAttempts: [1], log: log) }) { _ in }
    }
    try await job.run()
    #expect(log.value.map(\.attempt) == [1])
    #expect(job.failures.count == 1)
  }

  @Test func cancellingTheJobCancelsAPendingRetryImmediately() async throws {
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let firstFailed = Latch()
    let clock = ManualClock()
    let policy = RetryPolicy(maxAttempts: 3, initialDelay: .seconds(60), jitter: false)
    let job = ScriptedJob { job in
      job.trackAndQueue(
        retrying: policy, { FlakyTask(attempt: $0, failingAttempts: [1, 2], log: log, finished: firstFailed) }
      ) { _ in }
    }
    job.clock = clock
    job.startJob()
    // Attempt 1 ran and failed; the retry now waits for 60 s of the job's clock, which never moves.
    #expect(await firstFailed.waitOpen())
    #expect(await clock.waitForScheduled(1))
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(clock.pendingCount == 0)  // the pending retry was cancelled, not left to fire
    clock.advance(by: .seconds(60))
    #expect(log.value.map(\.attempt) == [1])
    // Attempt 1 failed on its own before the cancel, and is the task's last attempt.
    #expect(job.failures.map { $0.error as? TestError } == [TestError(1)])
  }

  @Test func retryPolicyDelays() {
    let policy = RetryPolicy(
      maxAttempts: 10, initialDelay: .milliseconds(100), multiplier: 2, maxDelay: .seconds(1), jitter: false)
    #expect(policy.baseDelay(beforeAttempt: 2) == .milliseconds(100))
    #expect(policy.baseDelay(beforeAttempt: 3) == .milliseconds(200))
    #expect(policy.baseDelay(beforeAttempt: 4) == .milliseconds(400))
    #expect(policy.baseDelay(beforeAttempt: 8) == .seconds(1))
    var generator = SeededGenerator(seed: 7)
    let jittered = RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(100), jitter: true)
    for _ in 0..<100 {
      let delay = jittered.delay(beforeAttempt: 2, using: &generator)
      #expect(delay >= .milliseconds(50) && delay <= .milliseconds(150))
    }
    #expect(RetryPolicy(maxAttempts: 0).maxAttempts == 1)
  }

  // MARK: Timeout

  @Test func aTaskRunningPastItsTimeoutIsCancelledAndCountsAsFailed() async throws {
    let clock = ManualClock()
    let stuck = ManualTask("stuck", finishesOnCancel: true)
    let routed = Locked(false)
    let job = ScriptedJob { job in
      job.trackAndQueue(stuck, timeout: .milliseconds(50)) { task in routed.mutate { $0 = task.isCancelled } }
    }
    job.clock = clock
    job.startJob()
    #expect(await stuck.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .milliseconds(49))
    #expect(!stuck.isCancelled)
    clock.advance(by: .milliseconds(1))
    try await job.run()
    #expect(routed.value)
    #expect(job.failures.count == 1)
    #expect(job.failures.first?.error as? JobKitError == JobKitError(.timedOut))
  }

  @Test func aTaskFinishingInTimeIsUnaffectedAndTheTimeoutNeverFiresLater() async throws {
    let clock = ManualClock()
    let quick = InstantTask("quick")
    let job = ScriptedJob { job in
      job.trackAndQueue(quick, timeout: .milliseconds(30)) { _ in }
    }
    job.clock = clock
    try await job.run()
    #expect(!quick.isCancelled)
    #expect(job.failures.isEmpty)
    // The timeout was disarmed when the task finished: moving past it cancels nothing. The timer
    // itself is cancelled by the thread that signalled the finish, after it left the job's lock;
    // when `main()`'s thread routed the task, the job can finish before that thread gets there.
    #expect(await eventually { clock.pendingCount == 0 })
    clock.advance(by: .seconds(1))
    #expect(!quick.isCancelled)
  }

  // MARK: Per-group limits

  @Test func aGroupLimitCapsConcurrencyAndKeepsTrackingOrder() async throws {
    let gated = Locked<(now: Int, max: Int, order: [Int])>((0, 0, []))
    let other = Locked<(now: Int, max: Int, order: [Int])>((0, 0, []))
    final class OtherTask: ConcurrentOperation, @unchecked Sendable {
      let running: Locked<(now: Int, max: Int, order: [Int])>
      let started = Latch()
      init(_ running: Locked<(now: Int, max: Int, order: [Int])>) { self.running = running }
      override func operationStart() {
        running.mutate {
          $0.now += 1
          $0.max = Swift.max($0.max, $0.now)
        }
        started.open()
        operationDone()
      }
    }
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(2, forGroup: GatedTask.self)
      for index in 0..<200 { job.trackAndQueue(GatedTask(index, running: gated)) }
      for _ in 0..<20 { job.trackAndQueue(OtherTask(other)) }
    }
    try await job.run()
    #expect(gated.value.max <= 2)
    #expect(gated.value.order.count == 200)
    #expect(other.value.max >= 1)
    #expect(job.log.all.filter { $0 == "taskFinished" }.count == 220)
  }

  @Test func waitingTasksStartInTrackingOrder() async throws {
    let gated = Locked<(now: Int, max: Int, order: [Int])>((0, 0, []))
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(1, forGroup: GatedTask.self)
      for index in 0..<100 { job.trackAndQueue(GatedTask(index, running: gated)) }
    }
    try await job.run()
    #expect(gated.value.max == 1)
    #expect(gated.value.order == Array(0..<100))
  }

  @Test func cancelDropsTasksWaitingForASlot() async throws {
    let blocker = ManualTask("blocker", finishesOnCancel: false)
    let waiting = (0..<5).map { ManualTask("waiting \($0)") }
    let routed = Locked(0)
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
      job.trackAndQueue(blocker) { _ in routed.mutate { $0 += 1 } }
      for task in waiting { job.trackAndQueue(task) { _ in routed.mutate { $0 += 1 } } }
    }
    job.startJob()
    #expect(await blocker.startedLatch.waitOpen())
    job.cancel()
    blocker.finish()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(waiting.allSatisfy { $0.isFinished && $0.isCancelled && !$0.didStart })
    #expect(routed.value == 0)  // no routing callback after the cancel
  }

  @Test func raisingALimitAdmitsWaitingTasksAndABadLimitIsReported() async throws {
    let first = ManualTask("first")
    let second = ManualTask("second")
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(0, forGroup: ManualTask.self)
      job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
      job.trackAndQueue(first)
      job.trackAndQueue(second)
    }
    QuietMisuse.silence(job)
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    #expect(!second.didStart)
    job.setMaxConcurrentTasks(2, forGroup: ManualTask.self)
    #expect(await second.startedLatch.waitOpen())
    first.finish()
    second.finish()
    try await job.run()
    #expect(job.misuses == [JobKitError(.invalidLimit)])
  }
}
