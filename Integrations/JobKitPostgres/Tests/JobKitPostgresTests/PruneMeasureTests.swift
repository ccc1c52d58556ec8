import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

/// Not a test of CI: `scripts/measure-prune.sh` runs it (`JOBKIT_MEASURE_PRUNE=1`) and prints
/// the claim latency and the table's size of a fresh queue, then after 200,000 completed rows
/// and a prune.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["JOBKIT_MEASURE_PRUNE"] == "1" && TestDatabase.isAvailable))
struct PruneMeasureTests {
  @Test func claimLatencyAndTableSizeAfterAPruneAreAFreshQueues() async throws {
    try await TestDatabase.withClient { client in
      let completed = Int(ProcessInfo.processInfo.environment["ROWS"] ?? "") ?? 200_000
      let fresh = try await Self.measure(client, label: "fresh queue")
      let queue = try await TestDatabase.makeQueue(client)
      try await client.query(
        """
        INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state, attempt,
          created_at, finished_at, output)
        SELECT \(queue.name), 'echo', 'done-' || g, '\\x7b7d'::bytea, 5, 'completed', 1,
          now() - interval '3 days', now() - interval '2 days', '\\x7b7d'::bytea
        FROM generate_series(1, \(Int64(completed))) AS g
        """)
      let full = try await Self.measure(client, label: "\(completed) completed rows")
      let clock = ContinuousClock()
      let start = clock.now
      let pruned = try await queue.prune()
      let pruneTime = clock.now - start
      #expect(pruned == completed)
      let afterPrune = try await Self.measure(client, label: "after the prune (\(pruneTime))")
      try await client.query("VACUUM jobkit_remote_tasks")
      let afterVacuum = try await Self.measure(client, label: "after the prune and a VACUUM")
      for line in [fresh, full, afterPrune, afterVacuum] { print(line) }
    }
  }

  /// The p50 and p99 of 300 claims of one row each on a queue of its own with 1,000 available
  /// rows, and the table's size (heap, indexes and all).
  static func measure(_ client: PostgresClient, label: String) async throws -> String {
    let queue = try await TestDatabase.makeQueue(client)
    try await client.query(
      """
      INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts)
      SELECT \(queue.name), 'echo', 'a-' || g, '\\x7b7d'::bytea, 5 FROM generate_series(1, 1000) AS g
      """)
    let worker = RemoteWorker(
      queue: queue, id: "measure", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
    let clock = ContinuousClock()
    var samples: [Double] = []
    for _ in 0..<300 {
      let start = clock.now
      _ = try await worker.claim(limit: 1, mayTakeSuspect: false, owner: "measure")
      let elapsed = clock.now - start
      samples.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
    }
    samples.sort()
    var size: Int64 = 0
    var rows: Int64 = 0
    for try await (bytes, count) in try await client.query(
      "SELECT pg_total_relation_size('jobkit_remote_tasks'), (SELECT count(*) FROM jobkit_remote_tasks)"
    ).decode((Int64, Int64).self) {
      size = bytes
      rows = count
    }
    try await client.query("DELETE FROM jobkit_remote_tasks WHERE queue = \(queue.name)")
    let figures = String(
      format: "claim p50 %.2f ms, p99 %.2f ms; table %.1f MB", samples[150], samples[296], Double(size) / 1_048_576)
    return "\(label): \(figures), \(rows) rows"
  }
}
