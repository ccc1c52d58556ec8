import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

extension DatabaseTests {
  /// A statement without an answer: bounded by `statementTimeout`, retried, fenced, not lost.
  @Suite
  struct StatementTimeoutTests {
    @Test func aCompletionWithoutAnAnswerIsRetriedUntilStoredOnce() async throws {
      try await TestDatabase.withClient { client in
        var configuration = RemoteQueue.Configuration()
        configuration.pollInterval = .milliseconds(250)
        configuration.statementTimeout = .milliseconds(500)
        let queue = RemoteQueue(
          client: client, name: TestDatabase.uniqueName("stuck"), configuration: configuration,
          logger: TestDatabase.logger)
        try await queue.migrate()
        try await TestSupport.prepare(client)
        let log = CountingLog()
        // Long leases: the row must stay this worker's while its completion waits.
        let worker = RemoteWorker(
          queue: queue, id: "stuck", configuration: TestDatabase.workerConfiguration(lease: .seconds(60)),
          logger: log.logger("worker"))
        TestSupport.registerEcho(on: worker, client: client)
        let workerRun = Task { try await worker.run() }
        defer { workerRun.cancel() }
        let work = RemoteWork<EchoKind>(
          EchoKind.Input(text: "s", sleepMilliseconds: 1_500), queue: queue, idempotencyKey: "s")
        let running = Task { try await work.run() }
        try await TestDatabase.eventually("the handler runs") {
          try await TestSupport.executions(client, queue: queue.name)["s"] == 1
        }
        // The row is locked while the handler sleeps: its completion (and heartbeat) wait for
        // the lock, get no answer within 500 ms, and are tried again, until the lock goes.
        try await client.withTransaction(logger: Logger(label: "test")) { connection in
          try await connection.query(
            "SELECT id FROM jobkit_remote_tasks WHERE queue = \(queue.name) FOR UPDATE", logger: Logger(label: "test"))
          try await TestDatabase.eventually("a completion timed out and is retried") {
            log.count(containing: "storing results failed; retrying") >= 2
          }
        }
        let output = try await running.value
        #expect(output.text == "s")
        #expect(output.attempt == 1)
        try await TestDatabase.eventually("the worker counted the completion") { worker.statistics.completed == 1 }
        #expect(worker.statistics.stale == 0)
        #expect(worker.statistics.claimed == 1)
        #expect(try await TestSupport.executions(client, queue: queue.name)["s"] == 1)
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(rows["s"]?.state == "completed")
        #expect(rows["s"]?.attempt == 1)
        workerRun.cancel()
        try await workerRun.value
      }
    }
  }
}
