import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

extension DatabaseTests {
  /// Durable jobs against the real server: a handler's `RemoteWork`s are its row's children
  /// (from its job's main, a nested job and a callback), keys scoped by the parent's, a waiting
  /// parent holds no slot, cancels and finishes cascade to the unfinished children.
  @Suite
  struct DurableJobTests {
    /// The worker of these tests: echo and tree handlers, run beside `queue` (its `run()` routes
    /// the children's results to the waiting jobs) unless `runsQueue` is false (another group
    /// runs it); shut down gracefully after `body`.
    static func withTreeWorker<Result: Sendable>(
      _ queue: RemoteQueue, id: String = "worker", maxConcurrent: Int = 16, runsQueue: Bool = true,
      _ body: @Sendable (RemoteWorker) async throws -> Result
    ) async throws -> Result {
      var configuration = TestDatabase.workerConfiguration()
      configuration.maxConcurrent = maxConcurrent
      return try await TestDatabase.withWorker(
        queue, id: id, configuration: configuration, runsQueue: runsQueue,
        register: { TestSupport.registerTree(on: $0, client: queue.client) }, body)
    }

    /// Each row of `queue`: key → (id, parent id, state).
    static func rows(_ client: PostgresClient, queue: String) async throws -> [String: (
      id: Int64, parent: Int64?, state: String
    )] {
      var rows: [String: (Int64, Int64?, String)] = [:]
      let result = try await client.query(
        "SELECT idempotency_key, id, parent_id, state FROM jobkit_remote_tasks WHERE queue = \(queue)")
      for try await (key, id, parent, state) in result.decode((String, Int64, Int64?, String).self) {
        rows[key] = (id, parent, state)
      }
      return rows
    }

    @Test func everyRemoteWorkOfAHandlersJobIsAChildWithAScopedKey() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await Self.withTreeWorker(queue) { _ in
          let first = TreeKind.Input(depth: 2, width: 3, label: "a")
          let second = TreeKind.Input(depth: 2, width: 3, label: "b")
          async let a = RemoteWork<TreeKind>(first, queue: queue, idempotencyKey: "a").run()
          async let b = RemoteWork<TreeKind>(second, queue: queue, idempotencyKey: "b").run()
          let (leavesA, leavesB) = try await (a, b)
          #expect(leavesA == TestSupport.expectedLeaves(first))
          #expect(leavesB == TestSupport.expectedLeaves(second))
        }
        let rows = try await Self.rows(client, queue: queue.name)
        // Two roots, 3 jobs each, 3 leaves per job: the local keys c0…c2 are used 8 times.
        let expectedRows = 2 * (1 + 3 + 9)
        #expect(rows.count == expectedRows)
        let separator = "\u{1F}"
        for root in ["a", "b"] {
          #expect(rows[root]?.parent == nil)
          for index in 0..<3 {
            let job = root + separator + "c\(index)"
            #expect(rows[job]?.parent == rows[root]?.id, "\(job)")
            for leaf in 0..<3 {
              let key = job + separator + "c\(leaf)"
              #expect(rows[key]?.parent == rows[job]?.id, "\(key)")
              #expect(rows[key]?.state == "completed")
            }
          }
        }
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == rows.count)
        #expect(executions.values.allSatisfy { $0 == 1 })
      }
    }

    @Test func aQueueScopedKeyIsSharedByEveryJob() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "worker", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        TestSupport.registerEcho(on: worker, client: client)
        worker.register(SharedLeafKind.self) { input, _ in
          try await RemoteWork<EchoKind>(
            EchoKind.Input(text: "shared"), queue: queue, idempotencyKey: "shared", keyScope: .queue
          ).run().text + input
        }
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        let one = try await RemoteWork<SharedLeafKind>("1", queue: queue, idempotencyKey: "one").run()
        let two = try await RemoteWork<SharedLeafKind>("2", queue: queue, idempotencyKey: "two").run()
        #expect(one == "shared1")
        #expect(two == "shared2")
        let rows = try await Self.rows(client, queue: queue.name)
        #expect(Set(rows.keys) == ["one", "two", "shared"])
        #expect(rows["shared"]?.parent == nil)
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions["shared"] == 1)
      }
    }

    @Test func oneSlotRunsAThreeLevelTreeOfDurableJobs() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let input = TreeKind.Input(depth: 3, width: 2, label: "t")
        let leaves = try await Self.withTreeWorker(queue, maxConcurrent: 1) { _ in
          try await withThrowingTaskGroup(of: [String]?.self) { group in
            group.addTask { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "t").run() }
            group.addTask {
              try await Task.sleep(for: .seconds(60))
              return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
          }
        }
        #expect(leaves == TestSupport.expectedLeaves(input), "the tree did not finish within 60 s on one slot")
      }
    }

    @Test func twoWorkersOfTwoSlotsRunATreeFiftyParentsWide() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let input = TreeKind.Input(depth: 2, width: 50, label: "w")
        let leaves = try await Self.withTreeWorker(queue, id: "one", maxConcurrent: 2) { _ in
          try await Self.withTreeWorker(queue, id: "two", maxConcurrent: 2, runsQueue: false) { _ in
            try await withThrowingTaskGroup(of: [String]?.self) { group in
              group.addTask { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "w").run() }
              group.addTask {
                try await Task.sleep(for: .seconds(120))
                return nil
              }
              let first = try await group.next() ?? nil
              group.cancelAll()
              return first
            }
          }
        }
        #expect(leaves == TestSupport.expectedLeaves(input), "the tree did not finish within 120 s")
      }
    }

    @Test func aCancelRequestCancelsEveryUnfinishedDescendantWithNoProcessAlive() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let input = TreeKind.Input(depth: 2, width: 2, label: "c", leafSleepMilliseconds: 60_000)
        let root = Task { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "c").run() }
        defer { root.cancel() }
        // A worker runs the tree until every leaf runs, then dies without a word (its run's
        // task is cancelled with a grace period of 0: rows handed back).
        var configuration = TestDatabase.workerConfiguration(grace: .zero)
        configuration.maxConcurrent = 16
        let worker = RemoteWorker(queue: queue, id: "worker", configuration: configuration, logger: TestDatabase.logger)
        TestSupport.registerEcho(on: worker, client: client)
        TestSupport.registerTree(on: worker, client: client)
        let group = ServiceGroup(services: [queue, worker], logger: TestDatabase.logger)
        let running = Task { try await group.run() }
        // The first leaf of each job answers at once, the second sleeps. Wait for exactly that:
        // five running rows alone could be a first leaf still running while a second is being
        // claimed, a claim the shutdown then gives up (its row stays running until its lease).
        try await TestDatabase.eventually("the jobs and their sleeping leaves run, the other leaves completed") {
          let rows = try await Self.rows(client, queue: queue.name)
          return rows.count == 7 && rows.values.filter { $0.state == "running" }.count == 5
            && rows.filter { $0.key.split(separator: "\u{1F}").count == 3 && $0.key.hasSuffix("c0") }
              .allSatisfy { $0.value.state == "completed" }
        }
        await group.triggerGracefulShutdown()
        try? await running.value
        #expect(try await Self.rows(client, queue: queue.name).values.filter { $0.state == "available" }.count == 5)
        // Nobody runs the tree now; the cancel of its root is a statement (the library's own).
        _ = try await client.query(
          """
          UPDATE jobkit_remote_tasks SET cancel_requested = true,
            state = CASE WHEN state = 'available' THEN 'cancelled' ELSE state END
          WHERE queue = \(queue.name) AND idempotency_key = 'c'
          """)
        let rows = try await Self.rows(client, queue: queue.name)
        #expect(rows.count == 7)
        for (key, row) in rows {
          // The leaves that answered at once completed; every other row is cancelled.
          let isLeaf = key.split(separator: "\u{1F}").count == 3
          let expected = isLeaf && key.hasSuffix("c0") ? "completed" : "cancelled"
          #expect(row.state == expected, "\(key): \(row.state)")
        }
      }
    }

    @Test func aCancelFromARunThatAnotherRunAttachedAfterMissesTheRow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let input = EchoKind.Input(text: "shared", sleepMilliseconds: 1_500)
          // The earlier run (a process that lost its lease, say) and the run that attached since.
          let earlier = Task { try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "k").run() }
          try await TestDatabase.eventually("the row runs") {
            try await TestDatabase.rows(client, queue: queue.name)["k"]?.state == "running"
          }
          let later = Task { try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "k").run() }
          try await TestDatabase.eventually("the later run attached") {
            try await Self.generation(client, queue: queue.name, key: "k") == 2
          }
          earlier.cancel()
          await #expect(throws: CancellationError.self) { try await earlier.value }
          let output = try await later.value
          #expect(output.text == "shared")
          #expect(try await TestSupport.executions(client, queue: queue.name) == ["k": 1])
        }
      }
    }

    static func generation(_ client: PostgresClient, queue: String, key: String) async throws -> Int32? {
      let rows = try await client.query(
        "SELECT generation FROM jobkit_remote_tasks WHERE queue = \(queue) AND idempotency_key = \(key)")
      for try await generation in rows.decode(Int32.self) { return generation }
      return nil
    }

    @Test func aFinishedJobCancelsTheChildrenItDidNotAskFor() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await Self.withTreeWorker(queue) { _ in
          // Its second leaf sleeps: the job runs for 1.5 s.
          let input = TreeKind.Input(depth: 1, width: 2, label: "f", leafSleepMilliseconds: 1_500)
          let root = Task { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "f").run() }
          try await TestDatabase.eventually("the job runs") {
            try await Self.rows(client, queue: queue.name)["f"]?.state == "running"
          }
          // A child of an earlier run, that this run does not ask for: due in an hour.
          _ = try await client.query(
            """
            INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, parent_id, run_after)
            SELECT queue, 'echo', 'f' || chr(31) || 'old', '{}'::bytea, 1, id, now() + interval '1 hour'
            FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND idempotency_key = 'f'
            """)
          let leaves = try await root.value
          #expect(leaves == ["f/0", "f/1"])
          let rows = try await Self.rows(client, queue: queue.name)
          #expect(rows["f\u{1F}old"]?.state == "cancelled")
          #expect(rows["f\u{1F}c0"]?.state == "completed")
        }
      }
    }
  }
}

/// A durable job whose child has a key shared by the whole queue.
enum SharedLeafKind: RemoteTaskKind {
  typealias Input = String
  typealias Output = String
  static let name = "shared-leaf"
}
