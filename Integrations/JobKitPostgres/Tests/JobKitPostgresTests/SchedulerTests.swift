import Foundation
import JobKit
import JobKitPostgres
import JobKitTesting
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

extension DatabaseTests {
  /// Periodic tasks against the real server: several schedulers at once, on one manual clock,
  /// insert each tick of an interval and of a cron schedule exactly once.
  @Suite(.timeLimit(.minutes(2)))
  struct SchedulerTests {
    @Test func threeSchedulersAtOnceInsertEachTickOnce() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let clock = ManualClock()
        let base = try Date("2026-01-01T00:00:05Z", strategy: .iso8601)
        let now: @Sendable () -> Date = { base.addingTimeInterval(clock.now.seconds) }
        let input = EchoKind.Input(text: "tick")
        let schedules = [
          try RemoteSchedule("every-10s", kind: EchoKind.self, input: input, every: .seconds(10)),
          try RemoteSchedule("each-minute", kind: EchoKind.self, input: input, cron: "* * * * *"),
        ]
        let schedulers = (0..<3).map { _ in
          RemoteScheduler(queue: queue, schedules: schedules, clock: clock, now: now)
        }
        let running = schedulers.map { scheduler in Task { try await scheduler.run() } }
        defer { for task in running { task.cancel() } }

        // Each scheduler waits for the next tick; after each tick's inserts, for the one after.
        #expect(await clock.waitForScheduled(3))
        clock.advance(by: .seconds(5))
        for round in 2...7 {
          #expect(await clock.waitForScheduled(3 * round))
          if round < 7 { clock.advance(by: .seconds(10)) }
        }

        let keys = try await TestDatabase.rows(client, queue: queue.name).keys.sorted()
        let expected =
          (1...6).map { "schedule/every-10s/\(1_767_225_600_000 + $0 * 10_000)" }
          + ["schedule/each-minute/1767225660000"]
        #expect(keys == expected.sorted())
        #expect(schedulers.map(\.insertedCount).reduce(0, +) == 7)
        for task in running { task.cancel() }
        for task in running { _ = await task.result }
      }
    }
  }
}

extension Duration {
  fileprivate var seconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}
