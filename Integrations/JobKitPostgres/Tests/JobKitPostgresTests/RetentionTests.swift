import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

extension DatabaseTests {
  /// Retention against the real server: which rows a prune deletes, its batches, one pruner at
  /// a time, a pruned key running again, and the settings it refuses.
  @Suite(.timeLimit(.minutes(2)))
  struct RetentionTests {
    @Test func rowsPastTheirStatesPeriodAreDeletedAndEveryOtherRowIsKept() async throws {
      try await TestDatabase.withClient { client in
        var retention = RemoteQueue.Retention()
        retention.completed = .seconds(3_600)
        retention.failed = .seconds(7_200)
        retention.cancelled = nil
        let queue = try await Self.makeQueue(client, retention: retention)
        let other = try await Self.makeQueue(client, retention: retention)
        let hour = 3_600.0
        try await Self.insertRow(client, queue.name, "completed-old", state: "completed", finishedAgo: 2 * hour)
        try await Self.insertRow(client, queue.name, "completed-young", state: "completed", finishedAgo: 0.5 * hour)
        try await Self.insertRow(client, queue.name, "failed-old", state: "failed", finishedAgo: 3 * hour)
        try await Self.insertRow(client, queue.name, "failed-young", state: "failed", finishedAgo: 1 * hour)
        try await Self.insertRow(client, queue.name, "cancelled-ancient", state: "cancelled", finishedAgo: 1_000 * hour)
        // Not final: kept whatever their finished_at says.
        try await Self.insertRow(client, queue.name, "available", state: "available", finishedAgo: 1_000 * hour)
        try await Self.insertRow(client, queue.name, "running", state: "running", finishedAgo: 1_000 * hour)
        try await Self.insertRow(client, queue.name, "fresh", state: "available", finishedAgo: nil)
        // Another queue's rows are that queue's business.
        try await Self.insertRow(client, other.name, "completed-old", state: "completed", finishedAgo: 2 * hour)

        #expect(try await queue.prune() == 2)

        let left = try await TestDatabase.rows(client, queue: queue.name)
        #expect(
          Set(left.keys) == [
            "completed-young", "failed-young", "cancelled-ancient", "available", "running", "fresh",
          ])
        #expect(try await TestDatabase.rows(client, queue: other.name).keys.sorted() == ["completed-old"])
        #expect(try await queue.prune() == 0)
      }
    }

    @Test func aPassDeletesAtMostABatchPerStatementAndEveryDueRow() async throws {
      try await TestDatabase.withClient { client in
        let log = CapturedLog()
        var retention = RemoteQueue.Retention()
        retention.batchSize = 3
        let queue = try await Self.makeQueue(
          client, retention: retention, logger: Logger(label: "retention") { _ in CapturedLog.Handler(log: log) })
        let day = 86_400.0
        try await Self.insertRows(client, queue.name, prefix: "c", count: 10, state: "completed", finishedAgo: 2 * day)
        try await Self.insertRows(client, queue.name, prefix: "f", count: 2, state: "failed", finishedAgo: 8 * day)
        try await Self.insertRows(client, queue.name, prefix: "k", count: 4, state: "completed", finishedAgo: 60)

        #expect(try await queue.prune() == 12)

        let batches = log.values(of: "rows", message: "pruned a batch").compactMap { Int($0) }
        // Completed: 3, 3, 3, 1; failed: 2; cancelled: 0 (one statement each finds the end).
        #expect(batches.allSatisfy { $0 <= 3 })
        #expect(batches.reduce(0, +) == 12)
        #expect(batches.count == 6)
        #expect(log.values(of: "rows", message: "finished rows pruned") == ["12"])
        #expect(try await TestDatabase.rows(client, queue: queue.name).count == 4)

        // A pass that deleted nothing logs no info line.
        #expect(try await queue.prune() == 0)
        #expect(log.values(of: "rows", message: "finished rows pruned") == ["12"])
      }
    }

    @Test func twoPrunersAtOnceDeleteEachRowOnce() async throws {
      try await TestDatabase.withClient { client in
        var retention = RemoteQueue.Retention()
        retention.batchSize = 7
        let first = try await Self.makeQueue(client, retention: retention)
        // A second process's queue object of the same name.
        let second = RemoteQueue(
          client: client, name: first.name, configuration: first.configuration, logger: TestDatabase.logger)
        try await Self.insertRows(
          client, first.name, prefix: "done", count: 500, state: "completed", finishedAgo: 2 * 86_400)

        async let one = first.prune()
        async let two = second.prune()
        var deleted = try await one + two
        // A pass that found the other at work ended early; what it left is deleted by the next.
        while try await TestDatabase.rows(client, queue: first.name).count > 0 {
          deleted += try await first.prune()
        }
        #expect(deleted == 500)
      }
    }

    @Test func aPrunerNeverWaitsForTheLockOrForALockedRow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await Self.makeQueue(client, retention: RemoteQueue.Retention())
        try await Self.insertRows(client, queue.name, prefix: "done", count: 5, state: "completed", finishedAgo: 86_500)
        let logger = Logger(label: "test")

        // Another pruner holds the queue's lock: this pass ends at once and deletes nothing.
        try await client.withTransaction(logger: logger) { connection in
          try await connection.query(
            "SELECT pg_advisory_xact_lock(hashtextextended('jobkit_remote_prune/' || \(queue.name), 0))",
            logger: logger)
          #expect(try await queue.prune() == 0)
        }
        #expect(try await TestDatabase.rows(client, queue: queue.name).count == 5)

        // A row another transaction holds is skipped; the others go.
        try await client.withTransaction(logger: logger) { connection in
          try await connection.query(
            """
            SELECT id FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND idempotency_key = 'done-0' FOR UPDATE
            """, logger: logger)
          #expect(try await queue.prune() == 4)
        }
        #expect(try await TestDatabase.rows(client, queue: queue.name).keys.sorted() == ["done-0"])
        #expect(try await queue.prune() == 1)
      }
    }

    @Test func aKeyWhoseRowWasPrunedRunsAgainWhenEnqueuedAgain() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await Self.makeQueue(client, retention: RemoteQueue.Retention())
        try await TestDatabase.withWorker(queue) { _ in
          let input = EchoKind.Input(text: "again")
          _ = try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "k").run()
          // Within its period the row is kept, and the key's result comes back without a run.
          #expect(try await queue.prune() == 0)
          _ = try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "k").run()
          #expect(try await TestSupport.executions(client, queue: queue.name) == ["k": 1])

          try await Self.age(client, queue.name, by: 2 * 86_400)
          #expect(try await queue.prune() == 1)
          let output = try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "k").run()
          #expect(output.attempt == 1)
          #expect(try await TestSupport.executions(client, queue: queue.name) == ["k": 2])
        }
      }
    }

    @Test func aWorkerPrunesOnItsOwn() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await Self.makeQueue(client, retention: RemoteQueue.Retention())
        var configuration = TestDatabase.workerConfiguration()
        configuration.pruneInterval = .milliseconds(100)
        try await TestDatabase.withWorker(queue, configuration: configuration) { _ in
          _ = try await RemoteWork<EchoKind>(EchoKind.Input(text: "x"), queue: queue, idempotencyKey: "x").run()
          try await Self.insertRow(client, queue.name, "young", state: "failed", finishedAgo: 60)
          try await Self.age(client, queue.name, by: 2 * 86_400, key: "x")
          try await TestDatabase.eventually("the worker pruned the old row") {
            try await TestDatabase.rows(client, queue: queue.name)["x"] == nil
          }
          #expect(try await TestDatabase.rows(client, queue: queue.name).keys.sorted() == ["young"])
        }
      }
    }

    @Test func settingsOutOfRangeAreRefused() async throws {
      try await TestDatabase.withClient { client in
        var zero = RemoteQueue.Retention()
        zero.completed = .zero
        var negative = RemoteQueue.Retention()
        negative.failed = .seconds(-1)
        var noBatch = RemoteQueue.Retention()
        noBatch.batchSize = 0
        for retention in [zero, negative, noBatch] {
          let queue = try await Self.makeQueue(client, retention: retention)
          try await Self.insertRow(client, queue.name, "old", state: "failed", finishedAgo: 30 * 86_400)
          await #expect(throws: RemoteQueueError(.invalidConfiguration, message: "")) { try await queue.prune() }
          let worker = RemoteWorker(
            queue: queue, id: "w", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
          await #expect(throws: RemoteQueueError(.invalidConfiguration, message: "")) { try await worker.run() }
          #expect(try await TestDatabase.rows(client, queue: queue.name).count == 1)
        }
        let queue = try await Self.makeQueue(client, retention: RemoteQueue.Retention())
        var configuration = TestDatabase.workerConfiguration()
        configuration.pruneInterval = .zero
        let worker = RemoteWorker(queue: queue, id: "w", configuration: configuration, logger: TestDatabase.logger)
        await #expect(throws: RemoteQueueError(.invalidConfiguration, message: "")) { try await worker.run() }

        // Keeping every state for ever is valid, and prunes nothing.
        let forever = try await Self.makeQueue(client, retention: .keepForever)
        try await Self.insertRow(client, forever.name, "old", state: "completed", finishedAgo: 3_000 * 86_400)
        #expect(try await forever.prune() == 0)
      }
    }

    // MARK: - Helpers

    static func makeQueue(
      _ client: PostgresClient, retention: RemoteQueue.Retention, logger: Logger = Logger(label: "test")
    ) async throws -> RemoteQueue {
      var configuration = RemoteQueue.Configuration()
      configuration.pollInterval = .milliseconds(250)
      configuration.retention = retention
      let queue = RemoteQueue(
        client: client, name: TestDatabase.uniqueName("retention"), configuration: configuration, logger: logger)
      try await queue.migrate()
      try await TestSupport.prepare(client)
      return queue
    }

    /// A row of `queue` in `state`, finished `finishedAgo` seconds ago by the database's clock
    /// (`nil`: no finished_at).
    static func insertRow(
      _ client: PostgresClient, _ queue: String, _ key: String, state: String, finishedAgo: Double?
    ) async throws {
      try await insertRows(client, queue, keys: [key], state: state, finishedAgo: finishedAgo)
    }

    static func insertRows(
      _ client: PostgresClient, _ queue: String, prefix: String, count: Int, state: String, finishedAgo: Double?
    ) async throws {
      try await insertRows(
        client, queue, keys: (0..<count).map { "\(prefix)-\($0)" }, state: state, finishedAgo: finishedAgo)
    }

    static func insertRows(
      _ client: PostgresClient, _ queue: String, keys: [String], state: String, finishedAgo: Double?
    ) async throws {
      try await client.query(
        """
        INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, state, max_attempts, finished_at)
        SELECT \(queue), 'echo', key, '\\x7b7d'::bytea, \(state), 1,
          now() - make_interval(secs => \(finishedAgo)::float8)
        FROM unnest(\(keys)::text[]) AS k(key)
        """)
    }

    /// Moves the finished_at of `queue`'s rows (of `key` only, if given) `seconds` back.
    static func age(_ client: PostgresClient, _ queue: String, by seconds: Double, key: String? = nil) async throws {
      try await client.query(
        """
        UPDATE jobkit_remote_tasks SET finished_at = finished_at - make_interval(secs => \(seconds))
        WHERE queue = \(queue) AND (\(key)::text IS NULL OR idempotency_key = \(key))
        """)
    }
  }
}

/// The log lines of a logger: message and metadata, for assertions.
final class CapturedLog: @unchecked Sendable {
  // @unchecked Sendable: `lines` is only touched under `lock`.
  private let lock = NSLock()
  private var lines: [(message: String, metadata: Logger.Metadata)] = []

  /// The `key` metadata values of the lines whose message is `message`, in order.
  func values(of key: String, message: String) -> [String] {
    lock.lock()
    defer { lock.unlock() }
    return lines.filter { $0.message == message }.compactMap { $0.metadata[key].map { "\($0)" } }
  }

  func append(_ message: String, _ metadata: Logger.Metadata) {
    lock.lock()
    defer { lock.unlock() }
    lines.append((message, metadata))
  }

  struct Handler: LogHandler {
    let log: CapturedLog
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
      get { metadata[key] }
      set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
      log.append(event.message.description, metadata.merging(event.metadata ?? [:]) { $1 })
    }
  }
}
