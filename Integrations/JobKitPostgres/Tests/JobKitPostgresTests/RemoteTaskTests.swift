import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

extension DatabaseTests {
  /// Remote tasks in one process, against the real server: results, keys, retries, bad rows,
  /// cancellation, shutdown and the fence.
  @Suite
  struct RemoteTaskTests {
    @Test func quotesSemicolonsAndBinaryRoundTrip() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let text = "it's \"quoted\"; DROP TABLE jobkit_remote_tasks; -- \\ $1 é 🚀"
          let bytes = (1...255).map { UInt8($0) }
          let key = "key'; DELETE FROM jobkit_remote_tasks; --"
          let output = try await RemoteWork<EchoKind>(
            EchoKind.Input(text: text, bytes: bytes), queue: queue, idempotencyKey: key
          ).run()
          #expect(output.text == text)
          #expect(output.bytes == bytes)
          #expect(output.attempt == 1)
          let rows = try await TestDatabase.rows(client, queue: queue.name)
          #expect(rows[key]?.state == "completed")
        }
      }
    }

    @Test func aJobRoutesEachResultOnce() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let job = TestSupport.EchoJob(queue: queue, count: 300, prefix: "job")
          try await TestDatabase.run(job)
          #expect(job.results.count == 300)
          #expect(job.results.values.allSatisfy { $0 == 1 })
          #expect(job.failureMessages.isEmpty)
          #expect(job.outputs["job-7"]?.text == "job-7")
          let executions = try await TestSupport.executions(client, queue: queue.name)
          #expect(executions.count == 300)
          #expect(executions.values.allSatisfy { $0 == 1 })
        }
      }
    }

    @Test func aKeyWithAFinishedRowReturnsItsResultWithoutRunningAgain() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await TestDatabase.withWorker(queue, id: "first") { _ in
          try await RemoteWork<EchoKind>(EchoKind.Input(text: "once"), queue: queue, idempotencyKey: "k").run()
        }
        // No worker runs now: the stored result must come back all the same.
        let again = try await RemoteWork<EchoKind>(EchoKind.Input(text: "once"), queue: queue, idempotencyKey: "k")
          .run()
        #expect(again == first)
        #expect(again.worker == "first")
        let checked1 = try await TestSupport.executions(client, queue: queue.name)
        #expect(checked1 == ["k": 1])
      }
    }

    @Test func failuresAreRetriedWithTheAttemptPassed() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { worker in
          let output = try await RemoteWork<EchoKind>(
            EchoKind.Input(text: "flaky", failBeforeAttempt: 3), queue: queue, idempotencyKey: "flaky"
          ).run()
          #expect(output.attempt == 3)
          let checked2 = try await TestSupport.executions(client, queue: queue.name)
          #expect(checked2 == ["flaky": 3])
          #expect(worker.statistics.failed == 2)
        }
      }
    }

    @Test func theLastFailureIsStoredWithItsAttempt() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client, maxAttempts: 2)
        try await TestDatabase.withWorker(queue) { _ in
          let work = RemoteWork<EchoKind>(
            EchoKind.Input(text: "doomed", failBeforeAttempt: 9), queue: queue, idempotencyKey: "doomed")
          let error = await #expect(throws: RemoteTaskError.self) { try await work.run() }
          #expect(error?.attempt == 2)
          #expect(error?.code == .handlerFailed)
          #expect(error?.message == "planned failure on attempt 2; with 'quotes'; and semicolons")
          let checked3 = try await TestSupport.executions(client, queue: queue.name)
          #expect(checked3 == ["doomed": 2])
        }
      }
    }

    @Test func anUnregisteredKindOrAnUndecodableInputFailsThatTaskOnly() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let unknown = RemoteWork<UnregisteredKind>("x", queue: queue, idempotencyKey: "unknown")
          let error = await #expect(throws: RemoteTaskError.self) { try await unknown.run() }
          #expect(error?.message.contains("no handler for kind 'unregistered'") == true)
          #expect(error?.code == .noHandler)
          #expect(error?.attempt == 1)

          try await client.query(
            """
            INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts)
            VALUES (\(queue.name), 'echo', 'garbage', \(Data("{not json".utf8)), 5)
            """)
          try await TestDatabase.eventually("the garbage row failed") {
            try await TestDatabase.rows(client, queue: queue.name)["garbage"]?.state == "failed"
          }
          var message = ""
          for try await (text) in try await client.query(
            "SELECT error_message FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND idempotency_key = 'garbage'"
          ).decode(String.self) {
            message = text
          }
          #expect(message.contains("the input does not decode as Input for kind 'echo'"))
          var code = ""
          for try await (text) in try await client.query(
            "SELECT error_code FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND idempotency_key = 'garbage'"
          ).decode(String.self) {
            code = text
          }
          #expect(RemoteTaskError.Code(name: code) == .inputUndecodable)

          // The worker goes on.
          let output = try await RemoteWork<EchoKind>(
            EchoKind.Input(text: "fine"), queue: queue, idempotencyKey: "fine"
          )
          .run()
          #expect(output.text == "fine")
        }
      }
    }

    @Test func aCancelledJobCancelsRunningHandlersWithinAHeartbeatAndStartsNoOther() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        var configuration = TestDatabase.workerConfiguration(heartbeat: .milliseconds(500))
        configuration.maxConcurrent = 2
        configuration.batchSize = 2
        try await TestDatabase.withWorker(queue, configuration: configuration) { worker in
          let job = TestSupport.EchoJob(queue: queue, count: 6, prefix: "c", sleepMilliseconds: 60_000)
          let running = Task { try await job.run() }
          try await TestDatabase.eventually("two handlers running") {
            try await TestSupport.executions(client, queue: queue.name).count == 2
          }
          var cancelledAt = Date()
          for try await (now) in try await client.query("SELECT clock_timestamp()").decode(Date.self) {
            cancelledAt = now
          }
          job.cancel()
          await #expect(throws: CancellationError.self) { try await running.value }
          // Each task that inserted its row (a task cancelled before it started inserts none).
          try await TestDatabase.eventually("every row cancelled") {
            let rows = try await TestDatabase.rows(client, queue: queue.name)
            return rows.count >= 2 && rows.values.allSatisfy { $0.state == "cancelled" }
          }
          // The handlers saw the cancel, by the database's clock, long before their 60 s sleep
          // ran out: a heartbeat (0.5 s) tells them; the bound is wide, for a loaded machine, and
          // only rules out a handler that was never told.
          var delays: [Double] = []
          for try await (delay) in try await client.query(
            """
            SELECT extract(epoch FROM cancelled_at - \(cancelledAt))::float8
            FROM jobkit_test_executions WHERE queue = \(queue.name) AND cancelled_at IS NOT NULL
            """
          ).decode(Double.self) {
            delays.append(delay)
          }
          #expect(delays.count == 2)
          #expect(delays.allSatisfy { $0 < 10 }, "\(delays)")
          let checked4 = try await TestSupport.executions(client, queue: queue.name).count
          #expect(checked4 == 2)
          // The rows are final before the worker counts them (it reads the statement's answer).
          try await TestDatabase.eventually("the worker counted both cancels") {
            worker.statistics.cancelled == 2
          }
        }
      }
    }

    @Test func aStaleWorkersLateResultIsRejected() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // Worker "stale" holds 1 s leases but heartbeats only every 60 s: its lease runs out while
        // its handler still runs, and worker "fresh" takes the row over.
        // One handler at a time: it cannot claim the row again while its first run goes on.
        var stale = TestDatabase.workerConfiguration(lease: .seconds(1), heartbeat: .seconds(60))
        stale.maxConcurrent = 1
        try await TestDatabase.withWorker(queue, id: "stale", configuration: stale) { staleWorker in
          let work = RemoteWork<EchoKind>(
            EchoKind.Input(text: "t", sleepMilliseconds: 2_500), queue: queue, idempotencyKey: "t")
          let running = Task { try await work.run() }
          try await TestDatabase.eventually("the stale worker started") {
            try await TestSupport.executions(client, queue: queue.name)["t"] == 1
          }
          // Long leases for "fresh", so a slow heartbeat on a loaded machine cannot lose its row.
          let fresh = TestDatabase.workerConfiguration(lease: .seconds(6))
          let output = try await TestDatabase.withWorker(queue, id: "fresh", configuration: fresh) { _ in
            try await running.value
          }
          #expect(output.worker == "fresh")
          #expect(output.attempt == 2)
          try await TestDatabase.eventually("the stale result was rejected") { staleWorker.staleCompletions == 1 }
          #expect(staleWorker.statistics.completed == 0)
          let rows = try await TestDatabase.rows(client, queue: queue.name)
          #expect(rows["t"]?.state == "completed")
          #expect(rows["t"]?.attempt == 2)
        }
      }
    }

    @Test func aGracefulShutdownHandsRunningRowsBackWithoutCountingTheAttempt() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "leaving", configuration: TestDatabase.workerConfiguration(grace: .milliseconds(200)),
          logger: TestDatabase.logger)
        TestSupport.registerEcho(on: worker, client: client)
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let serving = Task { try await group.run() }
        let work = RemoteWork<EchoKind>(
          EchoKind.Input(text: "long", sleepMilliseconds: 3_000), queue: queue, idempotencyKey: "long")
        let waiting = Task { try await work.run() }
        try await TestDatabase.eventually("the handler started") {
          try await TestSupport.executions(client, queue: queue.name)["long"] == 1
        }
        await group.triggerGracefulShutdown()
        try await serving.value
        #expect(worker.statistics.handedBack == 1)
        let row = try await TestDatabase.rows(client, queue: queue.name)["long"]
        #expect(row?.state == "available")
        #expect(row?.attempt == 0)
        let output = try await TestDatabase.withWorker(queue, id: "next") { _ in try await waiting.value }
        #expect(output.attempt == 1)
        #expect(output.worker == "next")
      }
    }
  }
}
