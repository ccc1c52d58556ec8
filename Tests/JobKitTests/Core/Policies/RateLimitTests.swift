import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task that counts its starts and finishes at once.
private final class CountedTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `starts` is thread-safe.
  let starts: Locked<Int>
  init(_ starts: Locked<Int>) {
    self.starts = starts
  }
  override func operationStart() {
    starts.mutate { $0 += 1 }
    operationDone()
  }
}

@Suite("Rate limits")
struct RateLimitTests {
  /// Starts exactly `count` tasks so far: waits for them, then checks none more started.
  private func expectStarts(_ starts: Locked<Int>, _ count: Int, _ comment: Comment) async {
    #expect(await eventually { starts.value >= count }, comment)
    #expect(starts.value == count, comment)
  }

  @Test func aBurstStartsAtOnceThenOneTaskPerIntervalOnTheJobsClock() async throws {
    let clock = ManualClock()
    let starts = Locked(0)
    let job = ScriptedJob { job in
      for _ in 0..<6 { job.trackAndQueue(CountedTask(starts)) }
    }
    job.clock = clock
    job.setRateLimit(2, burst: 2, forGroup: CountedTask.self)
    job.startJob()
    await expectStarts(starts, 2, "the bucket starts full")
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .milliseconds(499))
    await expectStarts(starts, 2, "no token before the interval")
    clock.advance(by: .milliseconds(1))
    await expectStarts(starts, 3, "one token per half second")
    clock.advance(by: .milliseconds(500))
    await expectStarts(starts, 4, "one token per half second")
    clock.advance(by: .seconds(1))
    await expectStarts(starts, 6, "two intervals, two tokens")
    try await job.run()
    // The bucket refills to its burst, then no timer is left.
    clock.advance(by: .seconds(1))
    #expect(clock.pendingCount == 0)
  }

  @Test func itCombinesWithTheConcurrencyLimit() async throws {
    let clock = ManualClock()
    let tasks = (0..<3).map { ManualTask("t\($0)") }
    let job = ScriptedJob { job in
      for task in tasks { job.trackAndQueue(task) }
    }
    job.clock = clock
    job.setRateLimit(1, burst: 3, forGroup: ManualTask.self)
    job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
    job.startJob()
    #expect(await tasks[0].startedLatch.waitOpen())
    tasks[0].finish()
    // A slot is free and tokens are left: the next one starts without the clock moving.
    #expect(await tasks[1].startedLatch.waitOpen())
    #expect(!tasks[2].didStart)
    tasks[1].finish()
    #expect(await tasks[2].startedLatch.waitOpen())
    tasks[2].finish()
    try await job.run()
  }

  @Test func aStopDropsTheRateLimitSoWaitingTasksFinishWithoutRunning() async {
    let clock = ManualClock()
    let starts = Locked(0)
    let tasks = (0..<4).map { _ in CountedTask(starts) }
    let job = ScriptedJob { job in
      for task in tasks { job.trackAndQueue(task) }
    }
    job.clock = clock
    job.setRateLimit(1, burst: 1, forGroup: CountedTask.self)
    job.startJob()
    await expectStarts(starts, 1, "the burst")
    job.cancel(reason: TestError(1))
    await #expect(throws: TestError(1)) { try await job.run() }
    #expect(starts.value == 1)
    #expect(tasks.dropFirst().allSatisfy { $0.isCancelled && $0.cancellationReason as? TestError == TestError(1) })
  }

  @Test(arguments: [(0.0, 1), (-1.0, 1), (Double.infinity, 1), (Double.nan, 1), (1.0, 0)])
  func badRatesAndBurstsAreReportedAndIgnored(rate: Double, burst: Int) async throws {
    let starts = Locked(0)
    let job = ScriptedJob { job in
      for _ in 0..<3 { job.trackAndQueue(CountedTask(starts)) }
    }
    job.setRateLimit(rate, burst: burst, forGroup: CountedTask.self)
    #expect(job.misuses == [JobKitError(.invalidLimit)])
    try await job.run()
    #expect(starts.value == 3)
  }
}
