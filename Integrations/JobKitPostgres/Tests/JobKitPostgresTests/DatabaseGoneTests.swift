import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension DatabaseTests {
  /// The server goes away under a waiting job: its tasks fail with one clear error once
  /// `reconnectTimeout` passed, the job finishes, and the attempts in between back off.
  @Suite
  struct DatabaseGoneTests {
    @Test func aJobWhoseServerIsGoneFailsItsTasksAfterTheReconnectTimeoutWithoutSpinning() async throws {
      let log = CountingLog()
      var clientConfiguration = try PostgresClient.Configuration(url: try #require(TestDatabase.url))
      clientConfiguration.options.connectTimeout = .seconds(2)
      let client = PostgresClient(configuration: clientConfiguration, backgroundLogger: log.logger("client"))
      let clientRun = Task { await client.run() }
      defer { clientRun.cancel() }
      var configuration = RemoteQueue.Configuration()
      configuration.pollInterval = .milliseconds(250)
      configuration.reconnectTimeout = .seconds(3)
      configuration.statementTimeout = .seconds(1)
      let queue = RemoteQueue(
        client: client, name: TestDatabase.uniqueName("gone"), configuration: configuration,
        logger: log.logger("queue"))
      try await queue.migrate()
      // No worker: the tasks wait until the server goes.
      let job = TestSupport.EchoJob(queue: queue, count: 3, prefix: "g")
      let running = Task { try await TestDatabase.run(job, timeout: .seconds(120)) }
      try await TestDatabase.eventually("the rows are inserted") {
        try await TestDatabase.rows(client, queue: queue.name).count == 3
      }
      log.reset()
      #expect(ServerControl.run("stop", "-m", "fast") == 0)
      do {
        try? await running.value
        // While the server is away: the job's look-ups and LISTEN reconnects back off.
        let attempts = log.count(containing: "retrying") + log.count(containing: "reconnecting")
        let clientMessages = log.count(label: "client")
        #expect(job.results.count == 3)
        #expect(job.results.values.allSatisfy { $0 == 1 })
        #expect(job.failureMessages.count == 3)
        for message in job.failureMessages.values {
          #expect(message.contains("the database could not be reached"))
          #expect(message.contains(queue.name))
          #expect(!message.contains("postgres://"))
        }
        // 3 s of backoff from 100 ms (doubling, at most 5 s) is a handful of attempts per loop;
        // a loop without backoff makes thousands.
        #expect(attempts >= 1)
        #expect(attempts <= 40)
        #expect(clientMessages <= 200)
      }
      #expect(ServerControl.run("start") == 0)
      try await TestDatabase.eventually("the server is back", timeout: .seconds(60)) {
        (try? await client.query("SELECT 1")) != nil
      }
    }

    /// A worker told to stop while its server is gone stops within its grace period and a few
    /// seconds, though a claim, a result and a hand-back are all without an answer: each gets
    /// what is left of the grace period (and the hand-back allowance), not a statement's time
    /// limit, and the rows left claimed come back when their leases expire.
    @Test(.timeLimit(.minutes(3)))
    func aWorkerStoppedWhileItsServerIsGoneStopsWithinItsGracePeriod() async throws {
      let log = CountingLog()
      let client = PostgresClient(
        configuration: try PostgresClient.Configuration(url: try #require(TestDatabase.url)),
        backgroundLogger: log.logger("client"))
      let clientRun = Task { await client.run() }
      defer { clientRun.cancel() }
      let queue = try await TestDatabase.makeQueue(client)
      let grace = Duration.seconds(2)
      let configuration = TestDatabase.workerConfiguration(
        lease: .seconds(3), heartbeat: .milliseconds(500), grace: grace)
      let worker = RemoteWorker(
        queue: queue, id: "orphaned", configuration: configuration, logger: log.logger("worker"))
      let gate = HeldKind.Gate()
      worker.register(HeldKind.self, handler: HeldKind.handler(gate))
      let group = ServiceGroup(services: [worker], logger: TestDatabase.logger)
      let run = Task { try await group.run() }
      _ = try await queue.enqueue(HeldKind.self, .untilCancelled, idempotencyKey: "held")
      _ = try await queue.enqueue(HeldKind.self, .whenTheGateOpens, idempotencyKey: "ending")
      try await TestDatabase.eventually("the worker runs both rows") {
        try await TestDatabase.rows(client, queue: queue.name).values.filter { $0.state == "running" }.count == 2
      }
      #expect(ServerControl.run("stop", "-m", "fast") == 0)
      // The second handler ends with the server gone: its result waits to be stored, and its
      // free slot sends the claim loop to the server.
      gate.open()
      try await TestDatabase.eventually("the second handler ended") { gate.passed }
      let start = ContinuousClock.now
      await group.triggerGracefulShutdown()
      // A hang fails the test: the limit is far above what a bounded shutdown takes.
      let stopped = await withTaskGroup(of: Bool.self) { wait in
        wait.addTask {
          _ = try? await run.value
          return true
        }
        wait.addTask {
          try? await Task.sleep(for: grace + .seconds(10))
          return false
        }
        let first = await wait.next() ?? false
        if !first { run.cancel() }
        wait.cancelAll()
        return first
      }
      #expect(
        stopped,
        "the worker did not stop within its grace period and 10 s:\n\(log.timeline("worker", since: start))")
      #expect(worker.statistics.handedBack == 0)
      #expect(worker.statistics.completed == 0)
      #expect(log.count(containing: "hand rows back") == 1)
      #expect(ServerControl.run("start") == 0)
      try await TestDatabase.eventually("the server is back", timeout: .seconds(60)) {
        (try? await client.query("SELECT 1")) != nil
      }
      // The rows left claimed run again once their leases expired.
      let register: (RemoteWorker) -> Void = { $0.register(HeldKind.self, handler: HeldKind.handler(gate)) }
      try await TestDatabase.withWorker(queue, id: "rescuer", configuration: configuration, register: register) { _ in
        try await TestDatabase.eventually("the rows ran again") {
          try await TestDatabase.rows(client, queue: queue.name).values.allSatisfy { $0.state == "completed" }
        }
      }
      let rows = try await TestDatabase.rows(client, queue: queue.name)
      #expect(rows["held"]?.attempt == 2)
      #expect(rows["ending"]?.attempt == 2)
    }
  }
}

/// The shutdown test's kind: a first attempt that runs until it is cancelled, or that answers
/// once the test opens a gate; later attempts answer at once.
enum HeldKind: RemoteTaskKind {
  enum Input: Int, Codable, Sendable {
    case untilCancelled
    case whenTheGateOpens
  }
  typealias Output = Int
  static let name = "held"

  /// Opened by the test; passed by the handler that waited for it.
  final class Gate: @unchecked Sendable {
    // @unchecked Sendable: both flags are only touched with `lock` held.
    private let lock = NSLock()
    private var isOpen = false
    private var didPass = false

    func open() { lock.withLock { isOpen = true } }
    var opened: Bool { lock.withLock { isOpen } }
    func pass() { lock.withLock { didPass = true } }
    var passed: Bool { lock.withLock { didPass } }
  }

  static func handler(_ gate: Gate) -> @Sendable (Input, RemoteTaskContext) async throws -> Int {
    { input, context in
      guard context.attempt == 1 else { return input.rawValue }
      switch input {
      case .untilCancelled:
        try await Task.sleep(for: .seconds(600))
      case .whenTheGateOpens:
        while !gate.opened { try await Task.sleep(for: .milliseconds(20)) }
        gate.pass()
      }
      return input.rawValue
    }
  }
}

/// `pg_ctl` on the test server (`JOBKIT_POSTGRES_PGCTL`, `_DATA`, `_RUNAS` from with-postgres).
enum ServerControl {
  /// Runs `pg_ctl -D DATA -l LOG -w ARGUMENTS...` and returns its exit status.
  static func run(_ arguments: String...) -> Int32 {
    let environment = TestDatabase.environment
    guard let pgctl = environment["JOBKIT_POSTGRES_PGCTL"], let data = environment["JOBKIT_POSTGRES_DATA"] else {
      Issue.record("JOBKIT_POSTGRES_PGCTL and JOBKIT_POSTGRES_DATA are not set (run through with-postgres)")
      return -1
    }
    let log = environment["JOBKIT_POSTGRES_LOG"] ?? "/dev/null"
    let runAs = (environment["JOBKIT_POSTGRES_RUNAS"] ?? "").split(separator: " ").map(String.init)
    // system(3) waits for its own child; Foundation's Process can miss the exit of runuser.
    let command = (runAs + [pgctl, "-D", data, "-l", log, "-w"] + arguments)
      .map { "'\($0)'" }.joined(separator: " ")
    return system(command + " >/dev/null")
  }
}

/// Log messages kept for counting, by logger label.
final class CountingLog: @unchecked Sendable {
  // @unchecked Sendable: `messages` is only touched with `lock` held.
  private let lock = NSLock()
  private var messages: [(label: String, text: String, time: ContinuousClock.Instant)] = []

  /// A logger (every level) whose messages this log keeps under `label`.
  func logger(_ label: String) -> Logger {
    Logger(label: label) { label in Handler(label: label, log: self) }
  }

  func append(_ label: String, _ text: String) {
    lock.lock()
    defer { lock.unlock() }
    messages.append((label, text, ContinuousClock.now))
  }

  func reset() {
    lock.lock()
    defer { lock.unlock() }
    messages = []
  }

  func count(containing text: String) -> Int {
    lock.lock()
    defer { lock.unlock() }
    return messages.filter { $0.text.contains(text) }.count
  }

  /// The messages of `label` since `start`, one a line, each with the seconds since `start`.
  func timeline(_ label: String, since start: ContinuousClock.Instant) -> String {
    lock.lock()
    defer { lock.unlock() }
    return messages.filter { $0.label == label && $0.time >= start }
      .map { message in
        let (seconds, attoseconds) = (message.time - start).components
        return String(format: "%.2f s ", Double(seconds) + Double(attoseconds) / 1e18) + message.text
      }
      .joined(separator: "\n")
  }

  func count(label: String) -> Int {
    lock.lock()
    defer { lock.unlock() }
    return messages.filter { $0.label == label }.count
  }

  struct Handler: LogHandler {
    let label: String
    let log: CountingLog
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
      get { metadata[key] }
      set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
      log.append(label, event.message.description)
    }
  }
}
