import Foundation
import JobKit
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// The batch insert statement against the real server: rows, keys, notifications, refusals.
  @Suite
  struct RemoteInsertTests {
    static func rows(_ keys: [String], kind: String = "echo") -> [RemoteNewRow] {
      keys.map { RemoteNewRow(kind: kind, key: $0, input: Data("input of \($0)".utf8)) }
    }

    @Test func aBatchInsertsEveryRowWithOneNotificationForTheWorkers() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let channel = try await queue.channels().new
        let keys = (1...50).map { "row-\($0)" }
        // A marker after the batch's commit: every notification of the batch came before it.
        let (outcomes, payloads) = try await TestDatabase.notifications(on: channel, client) {
          try await queue.insertBatch(Self.rows(keys))
        }
        #expect(outcomes.allSatisfy { (try? $0.get())?.final == nil })
        #expect(Set(outcomes.compactMap { try? $0.get().id }).count == 50)
        #expect(payloads == [""])
        var stored: [String: String] = [:]
        for try await (key, kind, input, state) in try await client.query(
          "SELECT idempotency_key, kind, input, state FROM jobkit_remote_tasks WHERE queue = \(queue.name)"
        ).decode((String, String, Data, String).self) {
          #expect(kind == "echo")
          #expect(state == "available")
          stored[key] = String(decoding: input, as: UTF8.self)
        }
        #expect(stored == Dictionary(uniqueKeysWithValues: keys.map { ($0, "input of \($0)") }))
      }
    }

    @Test func keysAttachToTheirRowsAndAKeyTwiceInABatchGetsOneRow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await client.query(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state, output,
            attempt, finished_at)
          VALUES (\(queue.name), 'echo', 'done', '\\x00', 5, 'completed', \(Data("stored".utf8)), 1, now()),
            (\(queue.name), 'echo', 'busy', '\\x00', 5, 'running', NULL, 1, NULL)
          """)
        let outcomes = try await queue.insertBatch(Self.rows(["new", "done", "busy", "new"]))
        let inserted = try outcomes.map { try $0.get() }
        #expect(inserted[0].final == nil)
        #expect(inserted[3].id == inserted[0].id)
        #expect(inserted[1].final?.state == "completed")
        #expect(inserted[1].final?.output == Data("stored".utf8))
        #expect(inserted[2].final == nil)
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(rows.count == 3)
        #expect(rows["new"]?.state == "available")
        #expect(rows["busy"]?.state == "running")
      }
    }

    @Test func aRowTheServerRefusesFailsAloneAndTheRestOfItsBatchIsInserted() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // The server refuses a NUL character in text.
        let keys = (1...9).map { $0 == 6 ? "bad\u{0}key" : "ok-\($0)" }
        let outcomes = try await queue.insertBatch(Self.rows(keys))
        for (key, outcome) in zip(keys, outcomes) {
          if key.hasPrefix("bad") {
            #expect(throws: (any Error).self) { try outcome.get() }
          } else {
            #expect((try? outcome.get()) != nil, "\(key) failed")
          }
        }
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(Set(rows.keys) == Set(keys.filter { !$0.hasPrefix("bad") }))
      }
    }

    @Test func startsOfOneJobWithTheSameKeyShareOneRowAndOneRun() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let job = SameKeyJob(queue: queue)
          try await TestDatabase.run(job)
          #expect(job.outputs.count == 40)
          #expect(Set(job.outputs).count == 1)
          let executions = try await TestSupport.executions(client, queue: queue.name)
          #expect(executions == ["shared": 1])
        }
      }
    }

    /// The look-up of final rows is planned at each call: a connection keeps no plan of it (one
    /// made while the table was small scans the whole table, and would stay as the table grows).
    @Test func theLookUpOfFinalRowsLeavesNoCachedPlanOnItsConnection() async throws {
      var configuration = try PostgresClient.Configuration(url: TestDatabase.url ?? "")
      configuration.options.maximumConnections = 1
      let client = PostgresClient(configuration: configuration)
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        let queue = try await TestDatabase.makeQueue(client)
        let ids = try await queue.insertRows(Self.rows(["a", "b"])).values.map(\.id)
        for _ in 0..<7 {
          let rows = try await queue.finalRows(among: ids + [-1])
          #expect(rows.map(\.0) == [-1])
        }
        var cached: [String] = []
        for try await (statement) in try await client.query(
          "SELECT statement FROM pg_prepared_statements", logger: TestDatabase.logger
        ).decode(String.self) {
          cached.append(statement)
        }
        #expect(cached.count >= 1, "the insert is prepared on the client's one connection")
        #expect(!cached.contains { $0.contains("'vanished'") })
      }
    }
  }
}

/// Tracks 40 remote tasks with one key at once.
private final class SameKeyJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `outputs` is only touched by the job's callbacks, which JobKit runs one
  // at a time, and read after the job finished.
  let queue: RemoteQueue
  private(set) var outputs: [String] = []

  init(queue: RemoteQueue) {
    self.queue = queue
    super.init()
  }

  override func main() {
    for _ in 0..<40 {
      trackAndQueue(
        resultOf: RemoteWork<EchoKind>(EchoKind.Input(text: "same"), queue: queue, idempotencyKey: "shared")
      ) { [self] result in
        if case .success(let output) = result { outputs.append("\(output.text)/\(output.worker)/\(output.attempt)") }
      }
    }
  }
}
