import Foundation
import JobKit
import Logging
import PostgresNIO
import Testing

@testable import JobKitPostgres

/// Measurements, not tests: run by `Benchmarks/Remote/queue-figures.sh` (a server with
/// `pg_stat_statements` loaded), skipped otherwise. Each prints its figures as `figure:` lines.
/// Their own statements carry the tag `queue-bench` and are not counted.
@Suite(.serialized, .enabled(if: queueFiguresAsked, "run by Benchmarks/Remote/queue-figures.sh"))
struct QueueBenchmarks {
  static func figure(_ text: String) {
    print("figure: \(text)")
  }

  static func resetStatements(_ client: PostgresClient) async throws {
    try await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements /* queue-bench */")
    try await client.query("SELECT pg_stat_statements_reset() /* queue-bench */")
  }

  /// The statements executed since the last reset, other than the benchmark's own.
  static func statementCount(_ client: PostgresClient) async throws -> Int {
    let rows = try await client.query(
      """
      SELECT coalesce(sum(calls), 0)::bigint /* queue-bench */ FROM pg_stat_statements
      WHERE query NOT LIKE '%queue-bench%' AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      """)
    for try await count in rows.decode(Int64.self) { return Int(count) }
    return 0
  }

  /// Per statement since the last reset (the worker's hot path): calls, mean milliseconds and
  /// buffer pages touched per call, by the statement's first words.
  static func statementProfile(_ client: PostgresClient) async throws -> [(String, Int, Double, Double)] {
    let rows = try await client.query(
      """
      SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), calls, mean_exec_time,
        (shared_blks_hit + shared_blks_read)::float8 / greatest(calls, 1) /* queue-bench */
      FROM pg_stat_statements
      WHERE query NOT LIKE '%queue-bench%' AND calls > 0
        AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY calls DESC LIMIT 8
      """)
    var profile: [(String, Int, Double, Double)] = []
    for try await (query, calls, mean, pages) in rows.decode((String, Int64, Double, Double).self) {
      profile.append((query, Int(calls), mean, pages))
    }
    return profile
  }

  @Test func batchEnqueueAgainstSingleEnqueues() async throws {
    let count = 10_000
    try await TestDatabase.withClient { client in
      let queue = try await TestDatabase.makeQueue(client)
      let clock = ContinuousClock()
      try await Self.resetStatements(client)
      let singleStart = clock.now
      for index in 0..<count {
        _ = try await queue.enqueue(NoOpKind.self, index, idempotencyKey: "single-\(index)")
      }
      let singleTime = clock.now - singleStart
      let single = try await Self.statementCount(client)
      try await Self.resetStatements(client)
      let batchStart = clock.now
      let handles = try await queue.enqueue(
        NoOpKind.self, contentsOf: (0..<count).map { RemoteTaskRequest($0, idempotencyKey: "batch-\($0)") })
      let batchTime = clock.now - batchStart
      let batch = try await Self.statementCount(client)
      #expect(handles.count == count)
      Self.figure(
        "enqueue \(count): single \(single) statements in \(singleTime); one batch call \(batch) statements in "
          + "\(batchTime); \(Double(single) / Double(max(batch, 1)))x fewer statements")
      for (query, calls, mean, pages) in try await Self.statementProfile(client) {
        Self.figure(
          "batch:   \(calls) calls, \(String(format: "%.3f", mean)) ms mean, \(Int(pages)) pages/call: \(query)")
      }
      #expect(single >= 10 * batch)
    }
  }

  @Test func claimsAndDrainDoNotReadFinishedRows() async throws {
    let tasks = Int(ProcessInfo.processInfo.environment["JOBKIT_QUEUE_FIGURES_TASKS"] ?? "") ?? 10_000
    let finished = Int(ProcessInfo.processInfo.environment["JOBKIT_QUEUE_FIGURES_FINISHED"] ?? "") ?? 100_000
    try await TestDatabase.withClient { client in
      let queue = try await TestDatabase.makeQueue(client)
      for (label, finishedBefore) in [("fresh queue", 0), ("after \(finished) finished rows", finished)] {
        if finishedBefore > 0 {
          try await client.query(
            """
            INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state, attempt,
              output, finished_at) /* queue-bench */
            SELECT \(queue.name), \(NoOpKind.name), 'finished-' || n, '0', 5, 'completed', 1, '0', now()
            FROM generate_series(1, \(finishedBefore)) AS n
            """)
          if ProcessInfo.processInfo.environment["JOBKIT_QUEUE_FIGURES_ANALYZE"] != "0" {
            try await client.query("VACUUM ANALYZE jobkit_remote_tasks /* queue-bench */")
          }
        }
        _ = try await queue.enqueue(
          NoOpKind.self, contentsOf: (0..<tasks).map { RemoteTaskRequest($0, idempotencyKey: "\(label)-\($0)") })
        try await Self.resetStatements(client)
        var configuration = TestDatabase.workerConfiguration(lease: .seconds(30), heartbeat: .seconds(10))
        configuration.maxConcurrent = 64
        configuration.batchSize = 64
        let worker = RemoteWorker(
          queue: queue, id: "bench", configuration: configuration, logger: Logger(label: "queue-bench"))
        worker.register(NoOpKind.self) { input, _ in input }
        let clock = ContinuousClock()
        let start = clock.now
        let running = Task { try await worker.run() }
        try await TestDatabase.eventually("the queue drained", timeout: .seconds(300)) {
          let rows = try await client.query(
            """
            SELECT count(*) /* queue-bench */ FROM jobkit_remote_tasks
            WHERE queue = \(queue.name) AND state IN ('available', 'running')
            """)
          for try await left in rows.decode(Int64.self) { return left == 0 }
          return false
        }
        let drain = clock.now - start
        running.cancel()
        try await running.value
        let rate = Double(tasks) / (Double(drain.components.seconds) + Double(drain.components.attoseconds) / 1e18)
        Self.figure("\(label): \(tasks) tasks drained in \(drain), \(Int(rate)) tasks/s")
        for (query, calls, mean, pages) in try await Self.statementProfile(client) {
          Self.figure(
            "\(label):   \(calls) calls, \(String(format: "%.3f", mean)) ms mean, "
              + "\(String(format: "%.1f", pages)) pages/call: \(query)")
        }
      }
    }
  }
}

/// Whether `queue-figures.sh` runs the suite (a server and `JOBKIT_QUEUE_FIGURES=1`).
let queueFiguresAsked =
  TestDatabase.isAvailable && ProcessInfo.processInfo.environment["JOBKIT_QUEUE_FIGURES"] == "1"

/// A task that gives back its input.
private enum NoOpKind: RemoteTaskKind {
  typealias Input = Int
  typealias Output = Int
  static let name = "queue-bench-noop"
}
