import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

@testable import JobKitPostgres

#if canImport(Glibc)
  import Glibc
#endif

extension DatabaseTests {
  /// Faults a worker must survive without failing innocent tasks or leaving rows stuck, and the
  /// inputs and settings it must refuse with a code: against the real server.
  @Suite(.timeLimit(.minutes(3)))
  struct RemoteFaultTests {
    /// Runs `work` for each key at once; returns each key's outcome.
    static func runAll(
      _ inputs: [String: EchoKind.Input], queue: RemoteQueue
    ) async -> [String: Result<EchoKind.Output, any Error>] {
      await withTaskGroup(of: (String, Result<EchoKind.Output, any Error>).self) { group in
        for (key, input) in inputs {
          group.addTask {
            do {
              return (key, .success(try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: key).run()))
            } catch {
              return (key, .failure(error))
            }
          }
        }
        var results: [String: Result<EchoKind.Output, any Error>] = [:]
        for await (key, result) in group { results[key] = result }
        return results
      }
    }

    static func count(_ client: PostgresClient, _ sql: PostgresQuery) async throws -> Int {
      var count = 0
      for try await (value) in try await client.query(sql).decode(Int64.self) { count = Int(value) }
      return count
    }

    /// Handlers that block their threads, more of them than cores: the worker's heartbeats go
    /// on, no lease expires, each task runs once.
    @Test func handlersThatBlockTheirThreadsKeepTheirLeases() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // 1.5 s leases, a heartbeat every 0.3 s; six handlers each block a thread for 4 s.
        let workers = try await WorkerProcesses.start(
          1, queue: queue.name,
          extra: ["--lease", "1.5", "--heartbeat", "0.3", "--max-concurrent", "6", "--batch", "6"])
        defer { workers.stopAll() }
        let inputs = Dictionary(
          uniqueKeysWithValues: (0..<6).map { ("b\($0)", EchoKind.Input(text: "b\($0)", blockMilliseconds: 4_000)) })
        let running = Task { await Self.runAll(inputs, queue: queue) }
        // Watched from this process, which blocks nothing: a running row past its lease.
        var expired = 0
        var finished = false
        while !finished {
          expired += try await Self.count(
            client,
            """
            SELECT count(*) FROM jobkit_remote_tasks
            WHERE queue = \(queue.name) AND state = 'running' AND lease_expires_at < clock_timestamp()
            """)
          finished =
            try await Self.count(
              client,
              "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND state = 'completed'") == 6
          try await Task.sleep(for: .milliseconds(50))
        }
        let results = await running.value
        #expect(expired == 0)
        for (key, result) in results {
          let output = try result.get()
          #expect(output.attempt == 1, "\(key)")
        }
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == 6)
        #expect(executions.values.allSatisfy { $0 == 1 })
      }
    }

    /// A handler that kills its process: the rows claimed beside it run again alone and
    /// complete; only the poison row uses up its attempts, and fails with `leaseExpired`.
    @Test func aPoisonTaskUsesUpOnlyItsOwnAttempts() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client, maxAttempts: 3)
        var inputs = Dictionary(
          uniqueKeysWithValues: (0..<5).map { ("i\($0)", EchoKind.Input(text: "i\($0)", sleepMilliseconds: 1_000)) })
        inputs["poison"] = EchoKind.Input(text: "poison", exitAfterMilliseconds: 300)
        let running = Task { [inputs] in await Self.runAll(inputs, queue: queue) }
        // Every row exists before the first worker claims: they share its first batch.
        try await TestDatabase.eventually("the rows are inserted") {
          try await TestDatabase.rows(client, queue: queue.name).count == 6
        }
        let respawner = Respawner(queue: queue.name)
        let respawning = Task { await respawner.run() }
        let results = await running.value
        respawning.cancel()
        respawner.stop()
        await respawning.value
        for index in 0..<5 {
          let result = results["i\(index)"]
          let output = try #require(try? result?.get(), "i\(index): \(String(describing: result))")
          #expect(output.attempt <= 2)
        }
        guard case .failure(let failure)? = results["poison"], let taskError = failure as? RemoteTaskError else {
          Issue.record("the poison task did not fail with RemoteTaskError: \(String(describing: results["poison"]))")
          return
        }
        #expect(taskError.code == .leaseExpired)
        #expect(taskError.attempt == 3)
        #expect(respawner.starts >= 3)
      }
    }

    /// A job cancels a running task; its worker stops before a heartbeat told the handler:
    /// the row handed back is cancelled (final), not available for ever. A row left available
    /// with a cancel request is made cancelled by the next claim.
    @Test func aCancelledTaskHandedBackIsCancelledNotStuck() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // No heartbeat within the test: the worker never hears of the cancel.
        let worker = RemoteWorker(
          queue: queue, id: "deaf",
          configuration: TestDatabase.workerConfiguration(
            lease: .seconds(120), heartbeat: .seconds(60), grace: .milliseconds(200)),
          logger: Logger(label: "test"))
        TestSupport.registerEcho(on: worker, client: client)
        let group = ServiceGroup(services: [queue, worker], logger: Logger(label: "test"))
        let serving = Task { try await group.run() }
        let waiting = Task {
          try await RemoteWork<EchoKind>(
            EchoKind.Input(text: "c", sleepMilliseconds: 60_000), queue: queue, idempotencyKey: "c"
          ).run()
        }
        try await TestDatabase.eventually("the handler started") {
          try await TestSupport.executions(client, queue: queue.name)["c"] == 1
        }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        try await TestDatabase.eventually("the cancel is requested") {
          try await Self.count(
            client,
            "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = \(queue.name) AND cancel_requested") == 1
        }
        await group.triggerGracefulShutdown()
        try await serving.value
        #expect(try await TestDatabase.rows(client, queue: queue.name)["c"]?.state == "cancelled")

        // A row an older worker handed back as available with its cancel request set.
        try await client.query(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, cancel_requested)
          VALUES (\(queue.name), 'echo', 'old', \(try JSONEncoder().encode(EchoKind.Input(text: "old"))), 5, true)
          """)
        try await TestDatabase.withWorker(queue, id: "next") { _ in
          try await TestDatabase.eventually("the claim made it cancelled") {
            try await TestDatabase.rows(client, queue: queue.name)["old"]?.state == "cancelled"
          }
        }
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions["old"] == nil)
      }
    }

    /// A re-run is a new request: a cancelled row runs again, and a late cancel from the
    /// earlier run does not touch it.
    @Test func aRerunAfterACancelledRunRunsItsTasks() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // No worker: the first run's task waits, then is cancelled (its row too, by the queue's run()).
        try await TestDatabase.withRunningQueue(queue) {
          let first = Task {
            try await RemoteWork<EchoKind>(EchoKind.Input(text: "r"), queue: queue, idempotencyKey: "r").run()
          }
          try await TestDatabase.eventually("the row is inserted") {
            try await TestDatabase.rows(client, queue: queue.name)["r"] != nil
          }
          first.cancel()
          await #expect(throws: CancellationError.self) { try await first.value }
          try await TestDatabase.eventually("the row is cancelled") {
            try await TestDatabase.rows(client, queue: queue.name)["r"]?.state == "cancelled"
          }
        }
        let second = Task {
          try await RemoteWork<EchoKind>(EchoKind.Input(text: "r"), queue: queue, idempotencyKey: "r").run()
        }
        try await TestDatabase.eventually("the re-run armed the row") {
          try await TestDatabase.rows(client, queue: queue.name)["r"]?.state == "available"
        }
        // The first run's cancel, arriving late: its generation is gone.
        try await queue.requestCancel(key: "r", generation: 1)
        #expect(try await TestDatabase.rows(client, queue: queue.name)["r"]?.state == "available")
        let output = try await TestDatabase.withWorker(queue) { _ in try await second.value }
        #expect(output.text == "r")
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["r": 1])
      }
    }

    /// A failed row gives its failure to a re-run, until `retryFailed` arms it again.
    @Test func retryFailedArmsAFailedRowAgain() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client, maxAttempts: 1)
        try await TestDatabase.withWorker(queue) { _ in
          let input = EchoKind.Input(text: "f", failBeforeAttempt: 2)
          let error = await #expect(throws: RemoteTaskError.self) {
            try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "f").run()
          }
          #expect(error?.code == .handlerFailed)
          #expect(error?.attempt == 1)
          // Attached again: the stored failure, no run.
          await #expect(throws: RemoteTaskError.self) {
            try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "f").run()
          }
          #expect(try await TestSupport.executions(client, queue: queue.name) == ["f": 1])
          let armed = try await queue.retryFailed(idempotencyKeys: ["f", "unknown"])
          #expect(armed == ["f"])
          let output = try await RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "f").run()
          #expect(output.attempt == 2)
        }
      }
    }

    /// A row deleted while its task waits fails the task with `taskVanished`.
    @Test func aRowDeletedUnderAWaitingTaskFailsItWithTaskVanished() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let waiting = Task {
          try await RemoteWork<EchoKind>(EchoKind.Input(text: "v"), queue: queue, idempotencyKey: "v").run()
        }
        try await TestDatabase.eventually("the row is inserted") {
          try await TestDatabase.rows(client, queue: queue.name)["v"] != nil
        }
        try await client.query("DELETE FROM jobkit_remote_tasks WHERE queue = \(queue.name)")
        // The test's time limit cancels this wait, and so the task: a hang fails the test.
        let error = await #expect(throws: RemoteQueueError.self) {
          try await withTaskCancellationHandler {
            try await waiting.value
          } onCancel: {
            waiting.cancel()
          }
        }
        #expect(error?.code == .taskVanished)
      }
    }

    /// A claim whose answer is lost (the statement outlives its time limit, then commits):
    /// its row runs on this worker at once, on the attempt the claim counted.
    @Test func aClaimWhoseAnswerWasLostRunsItsRowsWithoutLosingAnAttempt() async throws {
      try await TestDatabase.withClient { client in
        // The queue's table first: the trigger goes on it.
        var configuration = RemoteQueue.Configuration()
        configuration.pollInterval = .milliseconds(250)
        configuration.statementTimeout = .seconds(1)
        let queue = RemoteQueue(
          client: client, name: TestDatabase.uniqueName("lost"), configuration: configuration,
          logger: Logger(label: "test"))
        try await queue.migrate()
        try await client.query("CREATE TABLE IF NOT EXISTS jobkit_test_slow_claims (queue text PRIMARY KEY)")
        try await client.query(
          """
          CREATE OR REPLACE FUNCTION jobkit_test_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            DELETE FROM jobkit_test_slow_claims WHERE queue = NEW.queue;
            IF FOUND THEN PERFORM pg_sleep(2.5); END IF;
            RETURN NEW;
          END
          $$
          """)
        try await client.query(
          """
          CREATE OR REPLACE TRIGGER jobkit_test_slow_claim BEFORE UPDATE ON jobkit_remote_tasks FOR EACH ROW
            WHEN (OLD.state = 'available' AND NEW.state = 'running') EXECUTE FUNCTION jobkit_test_slow_claim()
          """)
        do {
          try await client.query("INSERT INTO jobkit_test_slow_claims (queue) VALUES (\(queue.name))")
          // Leases far longer than the test: only the worker's own look-up can run the row.
          let workerConfiguration = TestDatabase.workerConfiguration(
            lease: .seconds(100), heartbeat: .milliseconds(300))
          let output = try await TestDatabase.withWorker(queue, configuration: workerConfiguration) { worker in
            let output = try await RemoteWork<EchoKind>(EchoKind.Input(text: "l"), queue: queue, idempotencyKey: "l")
              .run()
            #expect(worker.statistics.rescued == 0)
            return output
          }
          #expect(output.attempt == 1)
          #expect(try await Self.count(client, "SELECT count(*) FROM jobkit_test_slow_claims") == 0)
        } catch {
          try await client.query("DROP TRIGGER jobkit_test_slow_claim ON jobkit_remote_tasks")
          throw error
        }
        try await client.query("DROP TRIGGER jobkit_test_slow_claim ON jobkit_remote_tasks")
      }
    }

    /// A worker that ran nothing stops without a misuse: its kinds' limits are set when their
    /// first row comes.
    @Test func aWorkerThatRanNothingStopsWithoutAMisuse() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "idle", configuration: TestDatabase.workerConfiguration(), logger: Logger(label: "test"))
        TestSupport.registerEcho(on: worker, client: client, maxConcurrent: 2)
        let group = ServiceGroup(services: [worker], logger: Logger(label: "test"))
        let serving = Task { try await group.run() }
        try await TestDatabase.eventually("the worker runs") { worker.job.isExecuting }
        await group.triggerGracefulShutdown()
        try await serving.value
        try await TestDatabase.eventually("the worker's job finished") { worker.job.isFinished }
        #expect(worker.job.misuses.isEmpty, "\(worker.job.misuses)")
      }
    }

    /// A schema newer than the library's: `schemaTooNew`, not a wrapped transaction error.
    @Test func aSchemaTooNewIsReportedWithItsCode() async throws {
      let database = "jobkit_new_\(UUID().uuidString.prefix(8).lowercased())"
      try await TestDatabase.withClient { client in
        try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
      }
      let url = try #require(TestDatabase.url).replacingOccurrences(of: "/postgres?", with: "/\(database)?")
      try await TestDatabase.withClient(url: url) { client in
        try await RemoteQueue(client: client, name: "q", configuration: .init(), logger: TestDatabase.logger).migrate()
        try await client.query("INSERT INTO jobkit_remote_schema (version) VALUES (999)")
        let error = await #expect(throws: RemoteQueueError.self) {
          try await RemoteQueue(client: client, name: "q", configuration: .init(), logger: TestDatabase.logger)
            .migrate()
        }
        #expect(error?.code == .schemaTooNew)
      }
      try await TestDatabase.withClient { client in
        try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(database) WITH (FORCE)"))
      }
    }

    /// Settings the server refuses are reported at once with their code; an unreachable server
    /// is retried until the timeout, and a cancel ends the wait.
    @Test func theConnectionCheckNamesWhatIsWrongWithoutThePassword() async throws {
      let url = try #require(TestDatabase.url)
      let logger = Logger(label: "test")
      let clock = ContinuousClock()
      let start = clock.now
      let user = url.replacingOccurrences(of: "postgres://postgres@", with: "postgres://nobody:s3cr3t-pw@")
      let refused = await #expect(throws: RemoteQueueError.self) {
        try await PostgresClient.Configuration.checkConnection(url: user, timeout: .seconds(60), logger: logger)
      }
      #expect(refused?.code == .authenticationFailed)
      #expect(refused?.message.contains("nobody") == true)
      #expect(refused.map { "\($0)".contains("s3cr3t-pw") } == false)
      let missing = url.replacingOccurrences(of: "/postgres?", with: "/no_such_database?")
      let notFound = await #expect(throws: RemoteQueueError.self) {
        try await PostgresClient.Configuration.checkConnection(url: missing, timeout: .seconds(60), logger: logger)
      }
      #expect(notFound?.code == .databaseNotFound)
      #expect(notFound?.message.contains("no_such_database") == true)
      // Neither waited for the timeout (generous bound: a loaded machine).
      #expect(clock.now - start < .seconds(30))

      let unreachable = await #expect(throws: RemoteQueueError.self) {
        try await PostgresClient.Configuration.checkConnection(
          url: "postgres://someone:s3cr3t-pw@127.0.0.1:1/db", timeout: .seconds(1), logger: logger)
      }
      #expect(unreachable?.code == .databaseUnreachable)
      #expect(unreachable.map { "\($0)".contains("s3cr3t-pw") } == false)

      let waiting = Task {
        try await PostgresClient.Configuration.checkConnection(
          url: "postgres://someone@127.0.0.1:1/db", timeout: .seconds(600), logger: logger)
      }
      waiting.cancel()
      await #expect(throws: CancellationError.self) { try await waiting.value }
    }
  }
}

/// Starts a worker process on a queue, and a new one each time the last one exited, until
/// stopped: a supervisor restarting a worker that a poison task keeps killing.
final class Respawner: @unchecked Sendable {
  // @unchecked Sendable: `current`, `stopped` and `count` are only touched with `lock` held.
  private let lock = NSLock()
  private var current: ChildProcess?
  private var stopped = false
  private var count = 0
  let queue: String

  init(queue: String) {
    self.queue = queue
  }

  var starts: Int {
    lock.withLock { count }
  }

  func run() async {
    while true {
      let index = lock.withLock { () -> Int? in
        // A worker that cannot even start would be started for ever.
        if stopped || count == 20 { return nil }
        count += 1
        return count
      }
      guard let index,
        let process = try? ChildProcess(
          [
            "worker", "--database", TestDatabase.url ?? "", "--queue", queue, "--id", "p\(index)", "--lease", "1",
            "--heartbeat", "0.25", "--batch", "8", "--max-concurrent", "8",
          ])
      else { return }
      let stop = lock.withLock {
        current = process
        return stopped
      }
      if stop { process.stop() }
      while process.process.isRunning {
        do {
          try await Task.sleep(for: .milliseconds(50))
        } catch {
          process.stop()
          return
        }
      }
    }
  }

  func stop() {
    let process = lock.withLock {
      stopped = true
      return current
    }
    process?.stop()
  }
}
