import Foundation
import Logging
import PostgresNIO

/// A named queue of remote tasks in a PostgreSQL database, reached through a `PostgresClient`.
///
/// Jobs add tasks to it with ``RemoteWork``; ``RemoteWorker``s of the same name run them. Every
/// queue shares one table (`jobkit_remote_tasks`, a `queue` column tells them apart): call
/// ``migrate()`` once at start-up, from any number of processes.
///
/// The client's `run()` must be running (in a task or a `ServiceGroup`) while the queue is used.
/// One `RemoteQueue` per name per process is enough: it keeps one `LISTEN` connection while jobs
/// wait for results, and polls every ``Configuration/pollInterval`` as a fallback.
public final class RemoteQueue: Sendable {
  /// How the queue's tasks are inserted and awaited.
  public struct Configuration: Sendable {
    /// The most runs of a task, the first included; stored in each row at insertion. At least 1.
    public var maxAttempts: Int = 5
    /// How often a waiting job looks at its rows when no notification came (a notification can
    /// be lost while the `LISTEN` connection reconnects).
    public var pollInterval: Duration = .seconds(1)

    /// How long a statement is retried while the database cannot be reached (a restart, a
    /// failover) before the error reaches the task.
    public var reconnectTimeout: Duration = .seconds(60)

    /// The defaults: 5 attempts, a poll every second, 60 s of reconnect attempts.
    public init() {}
  }

  /// The client the queue runs its statements on.
  public let client: PostgresClient
  /// The queue's name, stored in each of its rows.
  public let name: String
  /// The configuration given at creation.
  public let configuration: Configuration
  let logger: Logger
  let router: RemoteResultRouter
  private let channels = Locked<(new: String, done: String)?>(nil)

  /// A queue named `name` on `client`, with the default ``Configuration``.
  public convenience init(client: PostgresClient, name: String) {
    self.init(client: client, name: name, configuration: Configuration())
  }

  /// A queue named `name` on `client`. `logger` receives the queue's reconnects and errors
  /// (never a password).
  public init(
    client: PostgresClient, name: String, configuration: Configuration,
    logger: Logger = Logger(label: "JobKitPostgres.RemoteQueue")
  ) {
    self.client = client
    self.name = name
    self.configuration = configuration
    self.logger = logger
    self.router = RemoteResultRouter(client: client, logger: logger, pollInterval: configuration.pollInterval)
  }

  /// Creates or upgrades the schema (versioned; idempotent). Safe from several processes at
  /// once: one transaction under a `pg_advisory_xact_lock` applies the missing versions.
  public func migrate() async throws {
    try await RemoteSchema.migrate(client, logger: logger)
  }

  /// The `LISTEN` channels of the queue: new work for workers, final rows for jobs. Derived from
  /// the name by the database (`md5`), as the notifying trigger derives them.
  func channels() async throws -> (new: String, done: String) {
    if let known = channels.withLock({ $0 }) { return known }
    var hash = ""
    for try await (value) in try await client.query("SELECT md5(\(name))", logger: logger).decode(String.self) {
      hash = value
    }
    let names = (new: "jk_\(hash)_new", done: "jk_\(hash)_done")
    channels.withLock { $0 = names }
    return names
  }

  /// Inserts the task's row, or attaches to the row its key already has. Returns the row's id
  /// and, if that row is final, its outcome.
  func insert(kind: String, key: String, input: Data) async throws -> (id: Int64, final: RemoteRow?) {
    let maxAttempts = Int32(clamping: max(1, configuration.maxAttempts))
    let inserted = try await client.query(
      """
      INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts)
      VALUES (\(name), \(kind), \(key), \(input), \(maxAttempts))
      ON CONFLICT (queue, idempotency_key) DO NOTHING RETURNING id
      """, logger: logger)
    for try await (id) in inserted.decode(Int64.self) {
      return (id, nil)
    }
    let existing = try await client.query(
      """
      SELECT id, state, output, error_message, attempt FROM jobkit_remote_tasks
      WHERE queue = \(name) AND idempotency_key = \(key)
      """, logger: logger)
    for try await row in existing.decode((Int64, String, Data?, String?, Int32).self) {
      let outcome = RemoteRow(state: row.1, output: row.2, message: row.3, attempt: Int(row.4))
      return (row.0, outcome.isFinal ? outcome : nil)
    }
    throw RemoteQueueError(message: "the row of key '\(key)' vanished while attaching to it")
  }

  /// Asks for the cancellation of the task with key `key`: a row nobody runs is cancelled at
  /// once; a running one is marked, and its worker cancels the handler at its next heartbeat.
  func requestCancel(key: String) async throws {
    try await client.query(
      """
      UPDATE jobkit_remote_tasks SET cancel_requested = true,
        state = CASE WHEN state = 'available' THEN 'cancelled' ELSE state END,
        finished_at = CASE WHEN state = 'available' THEN now() ELSE finished_at END
      WHERE queue = \(name) AND idempotency_key = \(key) AND state IN ('available', 'running')
      """, logger: logger)
  }

  /// The final rows among `ids`.
  func finalRows(among ids: [Int64]) async throws -> [(Int64, RemoteRow)] {
    var result: [(Int64, RemoteRow)] = []
    let rows = try await client.query(
      """
      SELECT id, state, output, error_message, attempt FROM jobkit_remote_tasks
      WHERE id = ANY(\(ids)) AND state IN ('completed', 'failed', 'cancelled')
      """, logger: logger)
    for try await row in rows.decode((Int64, String, Data?, String?, Int32).self) {
      result.append((row.0, RemoteRow(state: row.1, output: row.2, message: row.3, attempt: Int(row.4))))
    }
    return result
  }
}

/// A row's outcome as a job reads it.
struct RemoteRow: Sendable {
  let state: String
  let output: Data?
  let message: String?
  let attempt: Int

  var isFinal: Bool { state == "completed" || state == "failed" || state == "cancelled" }

  /// The outcome for the job: the decoded output, the stored error, or `CancellationError`.
  func result<Output: Decodable>(_ type: Output.Type) -> Result<Output, any Error> {
    switch state {
    case "completed":
      guard let output else {
        return .failure(RemoteTaskError(message: "completed without an output", attempt: attempt))
      }
      do {
        return .success(try JSONDecoder().decode(Output.self, from: output))
      } catch {
        return .failure(
          RemoteTaskError(message: "the output does not decode as \(Output.self): \(error)", attempt: attempt))
      }
    case "cancelled":
      return .failure(CancellationError())
    default:
      return .failure(RemoteTaskError(message: message ?? "failed", attempt: attempt))
    }
  }
}

extension RemoteQueue {
  /// Listens on the queue's "new" channel (`done == false`) or "done" channel until the calling
  /// task is cancelled, reconnecting 250 ms after the connection ends. `onListening` runs each
  /// time the `LISTEN` took effect (notifications sent before are lost: look everything up
  /// then), `onNotification` with each payload.
  func listen(
    done: Bool, logger: Logger, onListening: @Sendable () -> Void, onNotification: @Sendable (String) -> Void
  ) async {
    while !Task.isCancelled {
      do {
        let channels = try await channels()
        try await client.withConnection { connection in
          try await connection.listen(on: done ? channels.done : channels.new) { notifications in
            onListening()
            for try await notification in notifications {
              onNotification(notification.payload)
            }
          }
        }
      } catch {
        if Task.isCancelled { return }
        logger.info(
          "jobkit-postgres: a LISTEN connection ended; reconnecting",
          metadata: ["queue": "\(name)", "error": "\(String(reflecting: error))"])
      }
      try? await Task.sleep(for: .milliseconds(250))
    }
  }

  /// Runs `body`, again every 250 ms while it fails because the database cannot be reached, for
  /// at most ``Configuration/reconnectTimeout``. Other errors are thrown at once.
  func retryingWhileUnreachable<Result: Sendable>(
    _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let clock = ContinuousClock()
    let deadline = clock.now + configuration.reconnectTimeout
    while true {
      do {
        return try await body()
      } catch {
        guard RemoteQueue.isUnreachable(error), clock.now < deadline, !Task.isCancelled else { throw error }
        logger.info(
          "jobkit-postgres: database unreachable; retrying",
          metadata: ["queue": "\(name)", "error": "\(String(reflecting: error))"])
        try await Task.sleep(for: .milliseconds(250))
      }
    }
  }

  /// Whether `error` says the server could not be reached or went away (as opposed to a
  /// statement the server refused): connection errors, and the server's classes 08
  /// (connection exception) and 57 (operator intervention: shutdown, starting up).
  static func isUnreachable(_ error: any Error) -> Bool {
    guard let error = error as? PSQLError else { return false }
    switch error.code {
    case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection:
      return true
    case .server:
      let state = error.serverInfo?[.sqlState] ?? ""
      return state.hasPrefix("08") || state.hasPrefix("57")
    default:
      return false
    }
  }
}
