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
