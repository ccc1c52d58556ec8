import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

/// The database the tests use: `JOBKIT_POSTGRES_URL`, set by `scripts/with-postgres`. Every
/// test uses a queue of its own, so suites run in parallel on one server.
enum TestDatabase {
  static let environment = ProcessInfo.processInfo.environment
  static let url = environment["JOBKIT_POSTGRES_URL"]
  static var isAvailable: Bool { url != nil }
  static let skipMessage: Comment =
    "JOBKIT_POSTGRES_URL is not set: run the tests through Integrations/JobKitPostgres/scripts/with-postgres"

  static func uniqueName(_ label: String) -> String {
    "\(label)-\(UUID().uuidString.prefix(8).lowercased())"
  }

  /// Runs `body` with a running client on `url` (the test database by default).
  @discardableResult
  static func withClient<Result: Sendable>(
    url: String? = nil,
    _ body: @Sendable (PostgresClient) async throws -> Result
  ) async throws -> Result {
    let configuration = try PostgresClient.Configuration(url: url ?? self.url ?? "")
    let client = PostgresClient(configuration: configuration)
    return try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      do {
        let result = try await body(client)
        group.cancelAll()
        return result
      } catch {
        group.cancelAll()
        throw error
      }
    }
  }

  /// A migrated queue of its own on `client`, with the tests' short intervals.
  static func makeQueue(_ client: PostgresClient, maxAttempts: Int = 5) async throws -> RemoteQueue {
    var configuration = RemoteQueue.Configuration()
    configuration.pollInterval = .milliseconds(250)
    configuration.retryPolicy = RetryPolicy(maxAttempts: maxAttempts)
    let queue = RemoteQueue(client: client, name: uniqueName("queue"), configuration: configuration, logger: logger)
    try await queue.migrate()
    try await TestSupport.prepare(client)
    return queue
  }

  /// The tests' worker settings: 2 s leases, 0.5 s heartbeats, quick retries.
  static func workerConfiguration(
    lease: Duration = .seconds(2), heartbeat: Duration = .milliseconds(500), grace: Duration = .seconds(5)
  ) -> RemoteWorker.Configuration {
    var configuration = RemoteWorker.Configuration()
    configuration.leaseDuration = lease
    configuration.heartbeatInterval = heartbeat
    configuration.pollInterval = .milliseconds(250)
    configuration.gracePeriod = grace
    configuration.retryPolicy = RetryPolicy(maxAttempts: 5, initialDelay: .milliseconds(20), maxDelay: .seconds(300))
    return configuration
  }

  /// The tests' logger.
  static let logger = Logger(label: "test")

  /// Runs `body` while an in-process worker with the echo handler (and what `register` adds)
  /// serves `queue` and the queue routes results (both in a service group; the worker alone
  /// without `runsQueue`, when another group runs the queue); then shuts the group down gracefully.
  static func withWorker<Result: Sendable>(
    _ queue: RemoteQueue, id: String = "worker",
    configuration: RemoteWorker.Configuration = workerConfiguration(),
    runsQueue: Bool = true, register: (RemoteWorker) -> Void = { _ in },
    _ body: @Sendable (RemoteWorker) async throws -> Result
  ) async throws -> Result {
    let worker = RemoteWorker(queue: queue, id: id, configuration: configuration, logger: logger)
    TestSupport.registerEcho(on: worker, client: queue.client)
    register(worker)
    let services: [any Service] = runsQueue ? [queue, worker] : [worker]
    let group = ServiceGroup(services: services, logger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
      tasks.addTask { try await group.run() }
      do {
        let result = try await body(worker)
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return result
      } catch {
        tasks.cancelAll()
        throw error
      }
    }
  }

  /// Runs `body` while `queue` routes results and sends cancels (its `run()`); then shuts it
  /// down gracefully.
  static func withRunningQueue<Result: Sendable>(
    _ queue: RemoteQueue, _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let group = ServiceGroup(services: [queue], logger: logger)
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
      tasks.addTask { try await group.run() }
      do {
        let result = try await body()
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return result
      } catch {
        tasks.cancelAll()
        throw error
      }
    }
  }

  /// Runs `job`; fails the test (and cancels the job) if it has not finished after `timeout`.
  static func run(_ job: JobController, timeout: Duration = .seconds(240)) async throws {
    try await withThrowingTaskGroup(of: Bool.self) { group in
      group.addTask {
        try await job.run()
        return true
      }
      group.addTask {
        try await Task.sleep(for: timeout)
        return false
      }
      let finished = try await group.next() ?? false
      group.cancelAll()
      if !finished {
        Issue.record("the job did not finish within \(timeout)")
        throw CancellationError()
      }
    }
  }

  /// Polls `condition` every 50 ms until it holds; fails the test after `timeout`.
  static func eventually(
    _ what: String, timeout: Duration = .seconds(30), _ condition: @Sendable () async throws -> Bool
  ) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
      if try await condition() { return }
      try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("timed out waiting for: \(what)")
    throw CancellationError()
  }

  /// Runs `body` while a connection of `client` listens on `channel`, then sends a marker on it:
  /// returns `body`'s result and every payload that came before the marker (every notification
  /// of `body`'s commits).
  static func notifications<Result: Sendable>(
    on channel: String, _ client: PostgresClient, during body: @Sendable () async throws -> Result
  ) async throws -> (result: Result, payloads: [String]) {
    try await client.withConnection { connection in
      try await connection.listen(on: channel) { notifications in
        let result = try await body()
        try await client.query("SELECT pg_notify(\(channel), 'end')")
        var payloads: [String] = []
        for try await notification in notifications {
          if notification.payload == "end" { break }
          payloads.append(notification.payload)
        }
        return (result, payloads)
      }
    }
  }

  /// Each row of `queue`: key → (state, attempt).
  static func rows(_ client: PostgresClient, queue: String) async throws -> [String: (state: String, attempt: Int)] {
    var rows: [String: (String, Int)] = [:]
    let result = try await client.query(
      "SELECT idempotency_key, state, attempt FROM jobkit_remote_tasks WHERE queue = \(queue)")
    for try await (key, state, attempt) in result.decode((String, String, Int32).self) {
      rows[key] = (state, Int(attempt))
    }
    return rows
  }
}

/// Every suite that uses the server, one test at a time: the restart test takes the server away
/// from everyone, and the multi-process tests keep both cores busy.
@Suite(.enabled(if: TestDatabase.isAvailable, TestDatabase.skipMessage), .serialized)
struct DatabaseTests {}
