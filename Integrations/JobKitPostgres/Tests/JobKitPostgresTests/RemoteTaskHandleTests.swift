import Foundation
import JobKit
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// Starting and awaiting tasks outside a job (`enqueue`, `handle(for:)`) against the real server.
  @Suite(.timeLimit(.minutes(2)))
  struct RemoteTaskHandleTests {
    /// The row of `key`: id, state, attempt, run_after minus now() in seconds, finished_at minus
    /// run_after in seconds.
    static func row(_ client: PostgresClient, queue: String, key: String) async throws -> (
      id: Int64, state: String, attempt: Int32, dueIn: Double, finishedAfterDue: Double?
    )? {
      let rows = try await client.query(
        """
        SELECT id, state, attempt, extract(epoch FROM run_after - now())::float8,
          extract(epoch FROM finished_at - run_after)::float8
        FROM jobkit_remote_tasks WHERE queue = \(queue) AND idempotency_key = \(key)
        """)
      for try await row in rows.decode((Int64, String, Int32, Double, Double?).self) {
        return (row.0, row.1, row.2, row.3, row.4)
      }
      return nil
    }

    static func expectCode(
      _ code: RemoteQueueError.Code, sourceLocation: SourceLocation = #_sourceLocation,
      _ body: () async throws -> Void
    ) async {
      do {
        try await body()
        Issue.record("no error; expected \(code)", sourceLocation: sourceLocation)
      } catch let error as RemoteQueueError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
      } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
      }
    }

    @Test func enqueueStoresTheRowWithoutAWorkerAndTheResultComesOnceOneRunsIt() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let handle = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "hello"), idempotencyKey: "a")
        #expect(handle.idempotencyKey == "a")
        let stored = try #require(try await Self.row(client, queue: queue.name, key: "a"))
        #expect(stored.id == handle.id)
        #expect(stored.state == "available")
        #expect(stored.attempt == 0)
        try await TestDatabase.withWorker(queue) { _ in
          let output = try await handle.result()
          #expect(output.text == "hello")
          #expect(output.attempt == 1)
          // A second wait, and a wait on a copy, get the same stored outcome.
          let copy = handle
          #expect(try await copy.result() == output)
        }
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["a": 1])
      }
    }

    @Test func aKeyWithARowAlreadyGivesThatRowsHandle() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "one"), idempotencyKey: "same")
        let second = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "two"), idempotencyKey: "same")
        #expect(first.id == second.id)
        try await TestDatabase.withWorker(queue) { _ in
          let text = try await second.result().text
          #expect(text == "one")
        }
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["same": 1])
      }
    }

    @Test func anotherProcessFindsTheHandleByItsKeyAndAwaitsIt() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let handle = try await queue.enqueue(
          EchoKind.self, EchoKind.Input(text: "far", sleepMilliseconds: 200), idempotencyKey: "shared")
        // Another client and another queue object of the same name: what another process has.
        try await TestDatabase.withClient { otherClient in
          let other = RemoteQueue(
            client: otherClient, name: queue.name, configuration: queue.configuration, logger: TestDatabase.logger)
          let found = try await other.handle(for: EchoKind.self, idempotencyKey: "shared")
          #expect(found.id == handle.id)
          #expect(found.idempotencyKey == "shared")
          try await TestDatabase.withWorker(queue) { _ in
            let text = try await found.result().text
            #expect(text == "far")
          }
        }
      }
    }

    @Test func aMissingKeyAWrongKindAndInvalidInputsFailWithTheirCodes() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        await Self.expectCode(.taskNotFound) {
          _ = try await queue.handle(for: EchoKind.self, idempotencyKey: "nobody")
        }
        _ = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "x"), idempotencyKey: "echo-row")
        await Self.expectCode(.kindMismatch) {
          _ = try await queue.handle(for: UnregisteredKind.self, idempotencyKey: "echo-row")
        }
        for key in ["", "nul\u{0}byte", String(repeating: "k", count: RemoteQueue.maxKeyBytes + 1)] {
          await Self.expectCode(.invalidKey) {
            _ = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "x"), idempotencyKey: key)
          }
          await Self.expectCode(.invalidKey) {
            _ = try await queue.handle(for: EchoKind.self, idempotencyKey: key)
          }
        }
        await Self.expectCode(.invalidInput) {
          _ = try await queue.enqueue(NumberKind.self, .nan, idempotencyKey: "nan")
        }
        await Self.expectCode(.invalidInput) {
          _ = try await queue.enqueue(
            NumberKind.self, 1, idempotencyKey: "never", runAt: Date(timeIntervalSince1970: .infinity))
        }
        // A batch with one bad request inserts nothing.
        await Self.expectCode(.invalidKey) {
          _ = try await queue.enqueue(
            NumberKind.self,
            contentsOf: [RemoteTaskRequest(1, idempotencyKey: "fine"), RemoteTaskRequest(2, idempotencyKey: "")])
        }
        #expect(try await TestDatabase.rows(client, queue: queue.name).keys.sorted() == ["echo-row"])
      }
    }

    @Test func cancelBeforeAWorkerClaimedItCancelsTheRowAndTheResultSaysSo() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let handle = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "no"), idempotencyKey: "c")
        try await handle.cancel()
        #expect(try await Self.row(client, queue: queue.name, key: "c")?.state == "cancelled")
        await #expect(throws: CancellationError.self) { _ = try await handle.result() }
        try await TestDatabase.withWorker(queue) { _ in
          // A task enqueued after the cancel goes through the worker: the cancelled one never did.
          _ = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "yes"), idempotencyKey: "d").result()
        }
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["d": 1])
      }
    }

    @Test func enqueueingACancelledKeyAgainArmsItsRow() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "again"), idempotencyKey: "re")
        try await first.cancel()
        let second = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "again"), idempotencyKey: "re")
        #expect(second.id == first.id)
        #expect(try await Self.row(client, queue: queue.name, key: "re")?.state == "available")
        // The first handle's cancel named the earlier run: it misses this one.
        try await first.cancel()
        #expect(try await Self.row(client, queue: queue.name, key: "re")?.state == "available")
        try await TestDatabase.withWorker(queue) { _ in
          let text = try await second.result().text
          #expect(text == "again")
        }
      }
    }

    @Test func enqueueingACancelledKeyAgainHonoursItsNewRunAt() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "later"), idempotencyKey: "re")
        try await first.cancel()
        _ = try await queue.enqueue(
          EchoKind.self, EchoKind.Input(text: "later"), idempotencyKey: "re", runAt: Date() + 3_600)
        let row = try #require(try await Self.row(client, queue: queue.name, key: "re"))
        #expect(row.state == "available")
        #expect(row.dueIn > 3_500 && row.dueIn <= 3_600)
        // Without a runAt, a cancelled key armed again is due at once.
        try await queue.handle(for: EchoKind.self, idempotencyKey: "re").cancel()
        _ = try await queue.enqueue(EchoKind.self, EchoKind.Input(text: "later"), idempotencyKey: "re")
        let now = try #require(try await Self.row(client, queue: queue.name, key: "re")?.dueIn)
        #expect(now <= 0)
      }
    }

    @Test func cancelOfARunningTaskStopsItsHandler() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let handle = try await queue.enqueue(
            EchoKind.self, EchoKind.Input(text: "long", sleepMilliseconds: 60_000), idempotencyKey: "long")
          try await TestDatabase.eventually("the worker runs the task") {
            try await Self.row(client, queue: queue.name, key: "long")?.state == "running"
          }
          try await handle.cancel()
          await #expect(throws: CancellationError.self) { _ = try await handle.result() }
        }
        #expect(try await Self.row(client, queue: queue.name, key: "long")?.state == "cancelled")
      }
    }

    @Test func runAtKeepsATaskFromWorkersUntilItsTime() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let later = try await queue.enqueue(
          EchoKind.self, EchoKind.Input(text: "later"), idempotencyKey: "later", runAt: Date() + 3_600)
        let soon = try await queue.enqueue(
          EchoKind.self, EchoKind.Input(text: "soon"), idempotencyKey: "soon", runAt: Date() + 1.5)
        _ = try await queue.enqueue(
          EchoKind.self, EchoKind.Input(text: "past"), idempotencyKey: "past", runAt: Date() - 3_600)
        let dueIn = try #require(try await Self.row(client, queue: queue.name, key: "later")?.dueIn)
        #expect(dueIn > 3_500 && dueIn <= 3_600)
        try await TestDatabase.withWorker(queue) { _ in
          _ = try await queue.handle(for: EchoKind.self, idempotencyKey: "past").result()
          let text = try await soon.result().text
          #expect(text == "soon")
          // The worker claimed the rows that were due, and left the one due in an hour.
          let row = try #require(try await Self.row(client, queue: queue.name, key: "later"))
          #expect(row.state == "available" && row.attempt == 0)
          _ = later
        }
        // The "soon" row ran after its time (both times by the database's clock).
        let soonRow = try #require(try await Self.row(client, queue: queue.name, key: "soon"))
        let finishedAfterDue = try #require(soonRow.finishedAfterDue)
        #expect(finishedAfterDue >= 0)
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["past": 1, "soon": 1])
      }
    }

    @Test func aBatchInsertsItsRowsWithOneStatementPerThousandRows() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let channel = try await queue.channels().new
        let requests = (0..<2_500).map {
          RemoteTaskRequest<EchoKind>(EchoKind.Input(text: "\($0)"), idempotencyKey: "k\($0)")
        }
        let (handles, payloads) = try await TestDatabase.notifications(on: channel, client) {
          try await queue.enqueue(EchoKind.self, contentsOf: requests + [requests[7]])
        }
        // One notification per statement: 3 statements for 2,501 requests.
        #expect(payloads == ["", "", ""])
        #expect(handles.map(\.idempotencyKey) == requests.map(\.idempotencyKey) + ["k7"])
        #expect(Set(handles.map(\.id)).count == 2_500)
        #expect(handles[2_500].id == handles[7].id)
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(rows.count == 2_500 && rows.values.allSatisfy { $0.state == "available" })
        #expect(try await queue.enqueue(EchoKind.self, contentsOf: []).isEmpty)
        try await TestDatabase.withWorker(queue) { _ in
          let text = try await handles[1_234].result().text
          #expect(text == "1234")
          let last = try await handles[2_499].result().text
          #expect(last == "2499")
        }
      }
    }

    @Test func theTransactionalFormsRowExistsOnlyOnceTheTransactionCommits() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let channel = try await queue.channels().new
        let logger = queue.logger
        let (handle, payloads) = try await TestDatabase.notifications(on: channel, client) {
          try await client.withTransaction(logger: logger) { connection in
            let handle = try await queue.enqueue(
              EchoKind.self, EchoKind.Input(text: "tx"), idempotencyKey: "tx", on: connection)
            // Not committed: invisible to everyone else, workers and other processes included.
            await Self.expectCode(.taskNotFound) {
              _ = try await queue.handle(for: EchoKind.self, idempotencyKey: "tx")
            }
            try await client.query("SELECT pg_notify(\(channel), 'before-commit')")
            return handle
          }
        }
        // The workers' notification went out with the commit, not before.
        #expect(payloads == ["before-commit", ""])
        #expect(try await queue.handle(for: EchoKind.self, idempotencyKey: "tx").id == handle.id)
        try await TestDatabase.withWorker(queue) { _ in
          let text = try await handle.result().text
          #expect(text == "tx")
        }
      }
    }

    @Test func aRolledBackTransactionLeavesNoRow() async throws {
      struct Rollback: Error {}
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let logger = queue.logger
        let requests = (0..<3).map { RemoteTaskRequest<EchoKind>(EchoKind.Input(text: "r"), idempotencyKey: "r\($0)") }
        let inserted = Locked<[RemoteTaskHandle<EchoKind>]>([])
        do {
          try await client.withTransaction(logger: logger) { connection in
            let handles = try await queue.enqueue(EchoKind.self, contentsOf: requests, on: connection)
            inserted.withLock { $0 = handles }
            throw Rollback()
          }
        } catch let error as PostgresTransactionError where error.closureError is Rollback {}
        let handles = inserted.withLock { $0 }
        #expect(handles.count == 3)
        #expect(try await TestDatabase.rows(client, queue: queue.name).isEmpty)
        await Self.expectCode(.taskNotFound) {
          _ = try await queue.handle(for: EchoKind.self, idempotencyKey: "r0")
        }
        await Self.expectCode(.taskVanished) { _ = try await handles[0].result() }
      }
    }
  }
}

/// A kind with a number as input (`.nan` does not encode as JSON); no worker runs it.
private enum NumberKind: RemoteTaskKind {
  typealias Input = Double
  typealias Output = Double
  static let name = "number"
}
