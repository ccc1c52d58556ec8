import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// `TaskOptions`: a timeout for each attempt combined with a retry policy, with and without a
/// completion closure. Time only moves when the test advances the job's `ManualClock`.
@Suite("Task options: timeout per attempt and retry together")
struct TaskOptionsTests {
  @Test func aTimedOutAttemptIsRetriedAndTheNextAttemptGetsItsOwnTimeout() async throws {
    let clock = ManualClock()
    let stuck = ManualTask("attempt 1", finishesOnCancel: true)
    let attempts = Locked<[Int]>([])
    let routed = Locked<[String?]>([])
    let options = TaskOptions(
      timeout: .milliseconds(50), retry: RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(20), jitter: false))
    let job = ScriptedJob { job in
      job.trackAndQueue(options: options) { attempt -> Operation in
        attempts.mutate { $0.append(attempt) }
        return attempt == 1 ? stuck : InstantTask("attempt \(attempt)")
      } completion: { task in
        routed.mutate { $0.append((task as? InstantTask)?.label) }
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await stuck.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))  // attempt 1's timeout
    clock.advance(by: .milliseconds(50))
    #expect(stuck.isCancelled)
    #expect(await clock.waitForScheduled(2))  // the retry delay
    clock.advance(by: .milliseconds(20))
    try await job.run()
    #expect(attempts.value == [1, 2])
    #expect(routed.value == ["attempt 2"])
    #expect(job.failures.isEmpty)
    #expect(job.log.all == ["group", "all"])
    #expect(clock.pendingCount == 0)  // attempt 2's timeout was disarmed when it finished
  }

  @Test func everyAttemptTimingOutRoutesTheLastOneToTaskFinishedAsTimedOut() async throws {
    let clock = ManualClock()
    let tasks = Locked<[ManualTask]>([])
    let options = TaskOptions(
      timeout: .seconds(1), retry: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: false))
    let job = ScriptedJob { job in
      job.trackAndQueue(options: options) { attempt in
        let task = ManualTask("attempt \(attempt)")
        tasks.mutate { $0.append(task) }
        return task
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(1))  // attempt 1 times out
    #expect(await clock.waitForScheduled(2))
    clock.advance(by: .seconds(1))  // the retry delay ends: attempt 2
    #expect(await clock.waitForScheduled(3))
    clock.advance(by: .seconds(1))  // attempt 2 times out
    try await job.run()
    #expect(tasks.value.map(\.label) == ["attempt 1", "attempt 2"])
    #expect(tasks.value.allSatisfy { $0.isCancelled })
    #expect(job.log.all == ["taskFinished", "group", "all"])
    #expect(job.failures.map { $0.error as? JobKitError } == [JobKitError(.timedOut)])
    #expect(job.failures.first?.taskName == "attempt 2")
  }

  @Test func retryIfSeesTheTimeoutError() async throws {
    let clock = ManualClock()
    let made = Locked(0)
    let seen = Locked<[JobKitError.Code]>([])
    let policy = RetryPolicy(maxAttempts: 5, initialDelay: .zero) { error in
      seen.mutate { $0.append((error as? JobKitError)?.code ?? .invalidLimit) }
      return false
    }
    let job = ScriptedJob { job in
      job.trackAndQueue(options: TaskOptions(timeout: .seconds(3), retry: policy)) { _ in
        made.mutate { $0 += 1 }
        return ManualTask()
      } completion: { _ in
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(3))
    try await job.run()
    #expect(made.value == 1)
    #expect(seen.value == [.timedOut])
    #expect(job.failures.map { $0.error as? JobKitError } == [JobKitError(.timedOut)])
  }

  @Test func aFailedAttemptsTimeoutIsDisarmedWhileItsRetryWaits() async throws {
    let clock = ManualClock()
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    // Attempt 1 fails when the test says so: only after its timeout was armed.
    let first = ManualTask("attempt 1")
    let options = TaskOptions(
      timeout: .seconds(10), retry: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: false))
    let job = ScriptedJob { job in
      job.trackAndQueue(options: options) { attempt -> Operation in
        attempt == 1 ? first : FlakyTask(attempt: attempt, failingAttempts: [], log: log)
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))  // attempt 1's timeout
    first.finish(error: TestError(1))
    #expect(await clock.waitForScheduled(2))  // the retry delay
    #expect(await eventually { clock.pendingCount == 1 })  // only the retry delay is left
    clock.advance(by: .seconds(1))
    try await job.run()
    #expect(log.value.map(\.attempt) == [2])
    #expect(job.failures.isEmpty)
    #expect(job.log.all == ["taskFinished", "group", "all"])
  }

  @Test func optionsWithNeitherRunOneAttemptAndATimeoutAloneNeedsNoCompletion() async throws {
    let clock = ManualClock()
    let stuck = ManualTask("stuck")
    let job = ScriptedJob { job in
      job.trackAndQueue(options: TaskOptions()) { _ in InstantTask() }
      job.trackAndQueue(stuck, timeout: .milliseconds(5))
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .milliseconds(5))
    try await job.run()
    #expect(stuck.isCancelled)
    #expect(job.log.all.filter { $0 == "taskFinished" }.count == 2)
    #expect(job.failures.map(\.taskName) == ["stuck"])
  }
}
