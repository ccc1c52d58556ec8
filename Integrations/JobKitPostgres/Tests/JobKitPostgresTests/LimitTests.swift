import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// Limits across workers against the real server: what the claim statement takes under a
  /// kind's limit and a limit per concurrency key, and four worker processes that never exceed
  /// them together.
  @Suite(.timeLimit(.minutes(3)))
  struct LimitTests {
    @Test func limitsAreStoredPerKindChangedAndRemoved() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        #expect(try await queue.limits().isEmpty)
        try await queue.setLimits(.init(maxRunning: 3), for: EchoKind.self)
        try await queue.setLimits(.init(maxRunningPerConcurrencyKey: 1), forKind: "other")
        #expect(
          try await queue.limits() == [
            "echo": .init(maxRunning: 3), "other": .init(maxRunningPerConcurrencyKey: 1),
          ])
        try await queue.setLimits(.init(maxRunning: 5, maxRunningPerConcurrencyKey: 2), forKind: "echo")
        try await queue.setLimits(.init(), forKind: "other")
        #expect(try await queue.limits() == ["echo": .init(maxRunning: 5, maxRunningPerConcurrencyKey: 2)])
        let other = try await TestDatabase.makeQueue(client)
        #expect(try await other.limits().isEmpty)

        let error = await #expect(throws: RemoteQueueError.self) {
          try await queue.setLimits(.init(maxRunning: -1, maxRunningPerConcurrencyKey: -2), forKind: "echo")
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("maxRunning -1") == true)
        #expect(error?.message.contains("maxRunningPerConcurrencyKey -2") == true)
        #expect(try await queue.limits() == ["echo": .init(maxRunning: 5, maxRunningPerConcurrencyKey: 2)])
      }
    }

    @Test func aClaimTakesWhatTheKindsRoomAndEachKeysRoomAllow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "w", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        func claim(_ limit: Int = 20) async throws -> [String] {
          try await worker.claim(limit: limit, mayTakeSuspect: false, owner: "o").map(\.key).sorted()
        }
        try await Self.insert(client, queue.name, (0..<6).map { ("k\($0)", nil) }, kind: "echo")
        try await Self.insert(client, queue.name, [("u0", nil), ("u1", nil)], kind: "unlimited")
        try await queue.setLimits(.init(maxRunning: 3), forKind: "echo")
        // Three of the limited kind, oldest first; the other kind is not held back.
        #expect(try await claim() == ["k0", "k1", "k2", "u0", "u1"])
        #expect(try await claim() == [])
        try await Self.finish(client, queue.name, ["k1"])
        #expect(try await claim() == ["k3"])
        // Raised while rows run: the room is the new limit less what runs.
        try await queue.setLimits(.init(maxRunning: 4), forKind: "echo")
        #expect(try await claim() == ["k4"])
        try await queue.setLimits(.init(maxRunning: 0), forKind: "echo")
        try await Self.finish(client, queue.name, ["k0", "k2", "k3", "k4"])
        #expect(try await claim() == [])
        try await queue.setLimits(.init(), forKind: "echo")
        #expect(try await claim() == ["k5"])

        // Per concurrency key: one running row per key; rows without a key are not held.
        let keyed = try await TestDatabase.makeQueue(client)
        let keyedWorker = RemoteWorker(
          queue: keyed, id: "w", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        try await keyed.setLimits(.init(maxRunningPerConcurrencyKey: 1), forKind: "echo")
        try await Self.insert(
          client, keyed.name,
          [("a0", "a"), ("a1", "a"), ("b0", "b"), ("b1", "b"), ("n0", nil), ("n1", nil), ("c0", "c")], kind: "echo")
        func claimKeyed(_ limit: Int = 20) async throws -> [String] {
          try await keyedWorker.claim(limit: limit, mayTakeSuspect: false, owner: "o").map(\.key).sorted()
        }
        #expect(try await claimKeyed() == ["a0", "b0", "c0", "n0", "n1"])
        #expect(try await claimKeyed() == [])
        try await Self.finish(client, keyed.name, ["a0"])
        #expect(try await claimKeyed() == ["a1"])
        // Both limits: 5 running fill the kind; one ended leaves room for b's second row.
        try await keyed.setLimits(.init(maxRunning: 5, maxRunningPerConcurrencyKey: 1), forKind: "echo")
        try await Self.finish(client, keyed.name, ["b0"])
        #expect(try await claimKeyed() == ["b1"])
      }
    }

    @Test func aRemoteWorkStoresItsConcurrencyKeyInItsRow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let keyed = RemoteWork<EchoKind>(
            EchoKind.Input(text: "a"), queue: queue, idempotencyKey: "keyed", concurrencyKey: "tenant-1")
          let plain = RemoteWork<EchoKind>(EchoKind.Input(text: "b"), queue: queue, idempotencyKey: "plain")
          let empty = RemoteWork<EchoKind>(
            EchoKind.Input(text: "c"), queue: queue, idempotencyKey: "empty", concurrencyKey: "")
          #expect(keyed.concurrencyKey == "tenant-1" && plain.concurrencyKey == nil)
          for work in [keyed, plain, empty] { _ = try await work.run() }
        }
        var stored: [String: String] = [:]
        for try await (key, concurrencyKey) in try await client.query(
          "SELECT idempotency_key, concurrency_key FROM jobkit_remote_tasks WHERE queue = \(queue.name)"
        ).decode((String, String?).self) {
          stored[key] = concurrencyKey ?? "none"
        }
        #expect(stored == ["keyed": "tenant-1", "plain": "none", "empty": "none"])
      }
    }

    @Test func fourWorkerProcessesNeverRunMoreThanTheLimitsTogether() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await queue.setLimits(.init(maxRunning: 3), for: EchoKind.self)
        let workers = try await WorkerProcesses.start(
          4, queue: queue.name, extra: ["--batch", "8", "--max-concurrent", "8", "--poll", "0.1"])
        defer { workers.stopAll() }

        // A kind limit of 3 over all four workers.
        try await Self.insert(
          client, queue.name, (0..<60).map { ("kind-\($0)", nil) }, kind: EchoKind.name, sleepMilliseconds: 80)
        let kindMaximum = try await Self.sample(client, queue.name, total: 60) { rows in
          rows.reduce(0) { $0 + $1.count }
        }
        #expect(kindMaximum == 3)

        // A limit of 1 per concurrency key among keys of 2 tasks each (and no kind limit).
        try await queue.setLimits(.init(maxRunningPerConcurrencyKey: 1), for: EchoKind.self)
        let keyed = (0..<60).map { ("key-\($0)", Optional("tenant-\($0 / 2)")) }
        try await Self.insert(client, queue.name, keyed, kind: EchoKind.name, sleepMilliseconds: 80)
        let keyMaximum = try await Self.sample(client, queue.name, total: 120) { rows in
          rows.filter { $0.key != nil }.map(\.count).max() ?? 0
        }
        #expect(keyMaximum == 1)
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == 120 && executions.values.allSatisfy { $0 == 1 })
      }
    }

    @Test func farFromEveryLimitClaimsShareTheLockAndNearOneEachTakesItAlone() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await Self.insert(client, queue.name, [("k0", nil)], kind: "echo")
        try await queue.setLimits(.init(maxRunning: 1_000_000), forKind: "echo")
        // Far from the limit: nothing to hold back, and the lock is held shared to the commit.
        var seen = try await Self.rooms(client, queue.name, batch: 16)
        #expect(seen.holder == [] && seen.other == [])
        // A claim of more than 64 rows takes the lock alone, so it waits.
        seen = try await Self.rooms(client, queue.name, batch: 65)
        #expect(seen.holder == [] && seen.other == nil)
        try await queue.setLimits(.init(maxRunning: 3), forKind: "echo")
        seen = try await Self.rooms(client, queue.name, batch: 16)
        #expect(seen.holder == [Room(kind: "echo", kindRoom: 3)] && seen.other == nil)
        // A limit per key far above what runs is far too; a small one is near.
        try await queue.setLimits(.init(maxRunningPerConcurrencyKey: 1_000_000), forKind: "echo")
        seen = try await Self.rooms(client, queue.name, batch: 16)
        #expect(seen.holder == [] && seen.other == [])
        try await queue.setLimits(.init(maxRunningPerConcurrencyKey: 2), forKind: "echo")
        seen = try await Self.rooms(client, queue.name, batch: 16)
        #expect(seen.holder == [Room(kind: "echo", perKey: 2)] && seen.other == nil)
      }
    }

    @Test func aSharedClaimCountsAfterTheLockAndLeavesRoomForTheClaimsItCannotSee() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        var connections = 0
        for try await value in try await client.query("SELECT current_setting('max_connections')::integer")
          .decode(Int32.self)
        {
          connections = Int(value)
        }
        let unseen = (connections - 1) * 64
        try await queue.setLimits(.init(maxRunning: unseen + 64 + 10), forKind: "echo")
        try await Self.insert(client, queue.name, (0..<50).map { ("r\($0)", nil) }, kind: "echo")
        try await client.withConnection { claimer in
          // A claim near the limit holds the lock alone and has set 50 rows running, uncommitted.
          try await claimer.query("BEGIN", logger: TestDatabase.logger)
          try await claimer.query(
            "SELECT pg_advisory_xact_lock(hashtextextended('jobkit_remote_limits/' || \(queue.name), 0))",
            logger: TestDatabase.logger)
          try await claimer.query(
            "UPDATE jobkit_remote_tasks SET state = 'running', owner = 'o' WHERE queue = \(queue.name)",
            logger: TestDatabase.logger)
          // The next claim counts no running row before the lock, so it asks for it shared, and
          // waits; once the first commits, it counts the 50 and keeps the room of the unseen.
          try await withThrowingTaskGroup(of: [Room].self) { group in
            group.addTask { try await client.withConnection { try await Self.room($0, queue.name, batch: 16) } }
            do {
              try await TestDatabase.eventually("the second claim waits for the lock") {
                var waiting: Int64 = 0
                for try await count in try await client.query(
                  """
                  SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND mode = 'ShareLock'
                    AND ((classid::bigint << 32) | objid::bigint)
                      = hashtextextended('jobkit_remote_limits/' || \(queue.name), 0)
                  """
                ).decode(Int64.self) {
                  waiting = count
                }
                return waiting == 1
              }
            } catch {
              try await claimer.query("ROLLBACK", logger: TestDatabase.logger)
              throw error
            }
            try await claimer.query("COMMIT", logger: TestDatabase.logger)
            let second = try await group.next()
            #expect(second == [Room(kind: "echo", kindRoom: 64 + 10 - 50)])
          }
        }
      }
    }

    /// A row of `jobkit_remote_limit_room`.
    struct Room: Equatable, Sendable {
      var kind: String
      var concurrencyKey: String? = nil
      var kindRoom: Int? = nil
      var perKey: Int? = nil
      var keyRoom: Int? = nil
    }

    /// The rows of `jobkit_remote_limit_room` for a claim of `batch` rows, on `connection`.
    static func room(_ connection: PostgresConnection, _ queue: String, batch: Int32) async throws -> [Room] {
      var rooms: [Room] = []
      for try await row in try await connection.query(
        "SELECT * FROM jobkit_remote_limit_room(\(queue), \(batch)::integer) ORDER BY kind, concurrency_key",
        logger: TestDatabase.logger
      ).decode((String, String?, Int32?, Int32?, Int32?).self) {
        rooms.append(
          Room(
            kind: row.0, concurrencyKey: row.1, kindRoom: row.2.map(Int.init), perKey: row.3.map(Int.init),
            keyRoom: row.4.map(Int.init)))
      }
      return rooms
    }

    /// The rows of `jobkit_remote_limit_room` for a claim of 16 rows (`holder`), and, while its
    /// transaction holds the lock, for a claim of `batch` rows (`other`, `nil`: it had to wait).
    static func rooms(
      _ client: PostgresClient, _ queue: String, batch: Int32
    ) async throws -> (holder: [Room], other: [Room]?) {
      try await client.withTransaction(logger: TestDatabase.logger) { connection in
        let holder = try await room(connection, queue, batch: 16)
        let other = try await roomWithoutWaiting(client, queue, batch: batch)
        return (holder, other)
      }
    }

    /// The rows of `jobkit_remote_limit_room` in a transaction of its own, or `nil` when its
    /// lock is held by another transaction (it gives up after 200 ms instead of waiting).
    static func roomWithoutWaiting(_ client: PostgresClient, _ queue: String, batch: Int32) async throws -> [Room]? {
      do {
        return try await client.withTransaction(logger: TestDatabase.logger) { connection in
          try await connection.query("SET LOCAL lock_timeout = '200ms'", logger: TestDatabase.logger)
          return try await room(connection, queue, batch: batch)
        }
      } catch let error as PostgresTransactionError {
        if let cause = error.closureError as? PSQLError, cause.serverInfo?[.sqlState] == "55P03" { return nil }
        throw error
      }
    }

    /// Reads the running rows of `queue` by concurrency key every 10 ms until `total` rows
    /// completed; returns the largest `measure` of a sample.
    static func sample(
      _ client: PostgresClient, _ queue: String, total: Int,
      measure: @Sendable ([(key: String?, count: Int)]) -> Int
    ) async throws -> Int {
      var maximum = 0
      let clock = ContinuousClock()
      let deadline = clock.now + .seconds(90)
      while clock.now < deadline {
        var running: [(key: String?, count: Int)] = []
        var completed = 0
        let rows = try await client.query(
          """
          SELECT state, concurrency_key, count(*)::bigint FROM jobkit_remote_tasks
          WHERE queue = \(queue) AND state IN ('running', 'completed') GROUP BY state, concurrency_key
          """)
        for try await (state, key, count) in rows.decode((String, String?, Int64).self) {
          if state == "running" { running.append((key, Int(count))) } else { completed += Int(count) }
        }
        maximum = max(maximum, measure(running))
        if completed == total { return maximum }
        try await Task.sleep(for: .milliseconds(10))
      }
      Issue.record("the tasks did not all complete")
      throw CancellationError()
    }

    /// Rows of `queue` and `kind` with the echo kind's input (and a concurrency key each), due now.
    static func insert(
      _ client: PostgresClient, _ queue: String, _ rows: [(key: String, concurrencyKey: String?)], kind: String,
      sleepMilliseconds: Int = 0
    ) async throws {
      let input = try JSONEncoder().encode(EchoKind.Input(text: "x", sleepMilliseconds: sleepMilliseconds))
      try await client.query(
        """
        INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, concurrency_key, run_after)
        SELECT \(queue), \(kind), key, \(input), 3, nullif(ck, ''), now() - interval '1 hour' + n * interval '1 ms'
        FROM unnest(\(rows.map { $0.key })::text[], \(rows.map { $0.concurrencyKey ?? "" })::text[])
          WITH ORDINALITY AS r(key, ck, n)
        """)
    }

    /// Marks `keys` of `queue` completed (as their workers would).
    static func finish(_ client: PostgresClient, _ queue: String, _ keys: [String]) async throws {
      try await client.query(
        """
        UPDATE jobkit_remote_tasks SET state = 'completed', finished_at = now(), owner = NULL, lease_expires_at = NULL
        WHERE queue = \(queue) AND idempotency_key = ANY(\(keys))
        """)
    }
  }
}
