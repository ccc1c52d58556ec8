import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
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
  private var messages: [(label: String, text: String)] = []

  /// A logger (every level) whose messages this log keeps under `label`.
  func logger(_ label: String) -> Logger {
    Logger(label: label) { label in Handler(label: label, log: self) }
  }

  func append(_ label: String, _ text: String) {
    lock.lock()
    defer { lock.unlock() }
    messages.append((label, text))
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
