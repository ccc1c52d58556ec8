import Foundation
import JobKit
import JobKitPostgres
import Logging
import Metrics
import MetricsTestKit
import PostgresNIO
import RemoteTestSupport
import Testing

extension DatabaseTests {
  /// The worker's metrics and the queues' gauges, into a test metrics factory, against the real
  /// server.
  @Suite(.timeLimit(.minutes(2)))
  struct MetricsTests {
    @Test func aWorkerCountsClaimWaitsRunsRetriesFailuresAndPrunedRows() async throws {
      try await TestDatabase.withClient { client in
        var queueConfiguration = RemoteQueue.Configuration()
        queueConfiguration.pollInterval = .milliseconds(250)
        let queue = RemoteQueue(
          client: client, name: TestDatabase.uniqueName("metrics"), configuration: queueConfiguration,
          logger: TestDatabase.logger)
        try await queue.migrate()
        try await TestSupport.prepare(client)
        // Three completed rows past the default retention (a day), for the worker's first prune.
        try await client.query(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state, finished_at)
          SELECT \(queue.name), 'echo', 'old-' || g, '\\x7b7d'::bytea, 1, 'completed', now() - interval '2 days'
          FROM generate_series(1, 3) AS g
          """)
        let rows: [(String, EchoKind.Input, Int32)] = [
          ("ok", EchoKind.Input(text: "ok"), 3),
          ("retried", EchoKind.Input(text: "retried", failBeforeAttempt: 2), 3),
          ("failed", EchoKind.Input(text: "failed", failBeforeAttempt: 9), 1),
        ]
        for (key, input, maxAttempts) in rows {
          try await client.query(
            """
            INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts)
            VALUES (\(queue.name), 'echo', \(key), \(try JSONEncoder().encode(input)), \(maxAttempts))
            """)
        }
        let metrics = TestMetrics()
        var configuration = TestDatabase.workerConfiguration()
        configuration.metricsFactory = metrics
        try await TestDatabase.withWorker(queue, configuration: configuration) { worker in
          try await TestDatabase.eventually("every row is final and the old ones pruned") {
            let states = try await TestDatabase.rows(client, queue: queue.name)
            return states.count == 3 && states["ok"]?.state == "completed"
              && states["retried"]?.state == "completed" && states["failed"]?.state == "failed"
          }
          try await TestDatabase.eventually("the worker stored every outcome") {
            worker.statistics.completed == 2 && worker.statistics.failed == 2
          }
        }
        let task = [("queue", queue.name), ("kind", "echo")]
        #expect(try metrics.expectCounter("jobkit_remote_retries_total", task).totalValue == 1)
        #expect(try metrics.expectCounter("jobkit_remote_failures_total", task).totalValue == 1)
        #expect(throws: (any Error).self) { try metrics.expectCounter("jobkit_remote_stale_completions_total", task) }
        // Four runs: ok, retried twice, failed.
        let waits = try metrics.expectTimer("jobkit_remote_claim_wait", task).values
        #expect(waits.count == 4 && waits.allSatisfy { $0 >= 0 })
        let runs = try metrics.expectTimer("jobkit_remote_run_duration", task).values
        #expect(runs.count == 4 && runs.allSatisfy { $0 >= 0 })
        #expect(try metrics.expectCounter("jobkit_remote_pruned_rows_total", [("queue", queue.name)]).totalValue == 3)

        let gauges = TestMetrics()
        try await RemoteQueueMetrics(client: client, factory: gauges).record()
        func gauge(_ state: String) throws -> Double? {
          try gauges.expectGauge("jobkit_remote_tasks", [("queue", queue.name), ("state", state)]).lastValue
        }
        #expect(try gauge("completed") == 2)
        #expect(try gauge("failed") == 1)
        #expect(try gauge("available") == 0)
        #expect(try gauge("running") == 0)
      }
    }
  }
}
