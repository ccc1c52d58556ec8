import Foundation
import JobKit
import Logging
import PostgresNIO
import ServiceLifecycle

/// A named queue of remote tasks in a PostgreSQL database, reached through a `PostgresClient`.
///
/// Jobs add tasks to it with ``RemoteWork``; ``RemoteWorker``s of the same name run them. Every
/// queue shares one table (`jobkit_remote_tasks`, a `queue` column tells them apart): call
/// ``migrate()`` once at start-up, from any number of processes.
///
/// The client's `run()` must be running (in a task or a `ServiceGroup`) while the queue is used.
/// A job's process runs the queue's ``run()`` in its `ServiceGroup` too (a `Service`): it keeps
/// one `LISTEN` connection that hands finished rows to the waiting jobs, and polls every
/// ``Configuration/pollInterval`` as a fallback. One `RemoteQueue` per name per process is enough.
public final class RemoteQueue: Service, Sendable {
  /// How the queue's tasks are inserted and awaited.
  public struct Configuration: Sendable {
    /// The most runs of a task, the first included (`maxAttempts`, at least 1), stored in each
    /// row at insertion. The waits between them and which errors are retried are the workers'
    /// (``RemoteWorker/Configuration/retryPolicy``). 5 attempts by default.
    public var retryPolicy = RetryPolicy(maxAttempts: 5)

    /// The most runs of a task (``retryPolicy``'s `maxAttempts`).
    @available(*, deprecated, renamed: "retryPolicy.maxAttempts")
    public var maxAttempts: Int {
      get { retryPolicy.maxAttempts }
      set { retryPolicy = retryPolicy.with(maxAttempts: newValue) }
    }
    /// How often a waiting job looks at its rows when no notification came (a notification can
    /// be lost while the `LISTEN` connection reconnects).
    public var pollInterval: Duration = .seconds(1)

    /// How long the database may stay unreachable (a restart, a failover, a server gone) before
    /// a job's waiting tasks fail with ``RemoteQueueError`` and a job's statements give up. Until
    /// then statements are retried, and `LISTEN` connections reopened, with jittered exponential
    /// backoff. A worker retries storing a result for as long as it runs (the fence decides).
    public var reconnectTimeout: Duration = .seconds(60)

    /// The longest wait for the answer to one statement of this library (a job's insert,
    /// look-up and cancel; a worker's claim, heartbeat, completion, rescue and hand-back).
    /// A statement without an answer by then counts as a lost connection: it is retried with
    /// backoff (a completion again fenced, so it is stored once). Keep it under the workers'
    /// lease.
    public var statementTimeout: Duration = .seconds(10)

    /// How long finished rows stay in the table, per final state (see ``Retention``): by
    /// default completed rows 1 day, failed and cancelled rows 7 days. A key whose row was
    /// deleted runs again when a job is re-run with it.
    public var retention = Retention()

    /// The defaults: 5 attempts, a poll every second, 60 s of reconnect attempts, 10 s per
    /// statement, the default ``Retention``.
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
  /// The starts of the queue's tasks, sent in batches (see `RemoteQueue+Insert.swift`).
  let inserts = RemoteInsertBatcher(maxRows: RemoteQueue.insertBatchRows, maxBytes: RemoteQueue.insertBatchBytes)
  private let channels = Locked<(new: String, done: String)?>(nil)

  /// A queue named `name` on `client`, with the default ``Configuration``; its logs go to a
  /// logger labelled "JobKitPostgres.RemoteQueue".
  @available(*, deprecated, message: "pass the logger: init(client:name:configuration:logger:)")
  public convenience init(client: PostgresClient, name: String) {
    self.init(
      client: client, name: name, configuration: Configuration(), logger: Logger(label: "JobKitPostgres.RemoteQueue"))
  }

  /// A queue named `name` on `client`; its logs go to a logger labelled
  /// "JobKitPostgres.RemoteQueue".
  @available(*, deprecated, message: "pass the logger: init(client:name:configuration:logger:)")
  public convenience init(client: PostgresClient, name: String, configuration: Configuration) {
    self.init(
      client: client, name: name, configuration: configuration, logger: Logger(label: "JobKitPostgres.RemoteQueue"))
  }

  /// A queue named `name` on `client`. `logger` receives the queue's reconnects and errors
  /// (never a password).
  public init(client: PostgresClient, name: String, configuration: Configuration, logger: Logger) {
    self.client = client
    self.name = name
    self.configuration = configuration
    self.logger = logger
    self.router = RemoteResultRouter(
      logger: logger, pollInterval: configuration.pollInterval, reconnectTimeout: configuration.reconnectTimeout)
  }

  /// Routes the results of the queue's tasks to the jobs that wait for them, until a graceful
  /// shutdown or the cancel of the calling task: one `LISTEN` connection on the queue's "done"
  /// channel, a look-up of the waited rows when notified and every ``Configuration/pollInterval``,
  /// and the cancels of the rows of cancelled jobs. Run it in the job process's `ServiceGroup`,
  /// next to the client. While it does not run, each waiting task looks its row up itself every
  /// poll interval (slower, one statement per task and interval), and a cancelled job's rows are
  /// marked cancelled only while another task of the queue waits.
  public func run() async throws {
    await cancelWhenGracefulShutdown {
      await self.router.drive(self)
    }
  }

  /// Creates or upgrades the schema (versioned; idempotent). Safe from several processes at
  /// once: one transaction under a `pg_advisory_xact_lock` applies the missing versions.
  /// Throws ``RemoteQueueError/Code/schemaTooNew`` for a schema newer than this library's, and
  /// ``RemoteQueueError/Code/databaseUnreachable`` when the client could make no connection
  /// (PostgresClient.Configuration.checkConnection(url:timeout:logger:) tells why, at once).
  public func migrate() async throws {
    try await RemoteSchema.migrate(client, logger: logger)
  }

  /// The `LISTEN` channels of the queue: new work for workers, final rows for jobs. Derived from
  /// the name by the database (`md5`), as the notifying trigger derives them.
  func channels() async throws -> (new: String, done: String) {
    if let known = channels.withLock({ $0 }) { return known }
    let hash = try await statement("SELECT md5(\(name))") { rows in
      var hash = ""
      for try await (value) in rows.decode(String.self) { hash = value }
      return hash
    }
    let names = (new: "jk_\(hash)_new", done: "jk_\(hash)_done")
    channels.withLock { $0 = names }
    return names
  }

  /// Asks for the cancellation of the task with key `key` as of `generation` (a re-run that
  /// re-armed the row since is not cancelled): a row nobody runs is cancelled at once; a running
  /// one is marked, and its worker cancels the handler at its next heartbeat.
  func requestCancel(key: String, generation: Int32?) async throws {
    try await statement(
      """
      UPDATE jobkit_remote_tasks SET cancel_requested = true,
        state = CASE WHEN state = 'available' THEN 'cancelled' ELSE state END,
        finished_at = CASE WHEN state = 'available' THEN now() ELSE finished_at END
      WHERE queue = \(name) AND idempotency_key = \(key) AND state IN ('available', 'running')
        AND (\(generation)::integer IS NULL OR generation = \(generation))
      """
    ) { rows in
      for try await _ in rows {}
    }
  }

  /// The final rows among `ids`, and those that no longer exist (state `vanished`).
  func finalRows(among ids: [Int64]) async throws -> [(Int64, RemoteRow)] {
    try await planned(FinalRowsStatement(ids: ids))
  }
}

/// The final rows among `ids` (``RemoteQueue/finalRows(among:)``), planned at each call (see
/// ``RemoteQueue/planned(_:)``); a row that no longer exists comes back as `vanished`.
struct FinalRowsStatement: PostgresPreparedStatement {
  typealias Row = (Int64, RemoteRow)

  static let name = "jobkit_remote_final_rows_1"

  static let sql = """
    SELECT id, state, output, error_message, attempt, error_code FROM jobkit_remote_tasks
    WHERE id = ANY($1::bigint[]) AND state IN ('completed', 'failed', 'cancelled')
    UNION ALL
    SELECT w.id, 'vanished', NULL, NULL, 0, NULL FROM unnest($1::bigint[]) AS w(id)
    WHERE NOT EXISTS (SELECT 1 FROM jobkit_remote_tasks t WHERE t.id = w.id)
    """

  let ids: [Int64]

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 1)
    bindings.append(ids)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let (id, state, output, message, attempt, code) = try row.decode(
      (Int64, String, Data?, String?, Int32, String?).self)
    return (id, RemoteRow(state: state, output: output, message: message, attempt: Int(attempt), code: code))
  }
}

/// A row's outcome as a job reads it.
struct RemoteRow: Sendable {
  let state: String
  let output: Data?
  let message: String?
  let attempt: Int
  /// The stored ``RemoteTaskError/Code`` name of a failure.
  var code: String? = nil

  var isFinal: Bool { state == "completed" || state == "failed" || state == "cancelled" }

  /// The outcome for the job: the decoded output, the stored error, or `CancellationError`.
  func result<Output: Decodable>(_ type: Output.Type) -> Result<Output, any Error> {
    switch state {
    case "completed":
      guard let output else {
        return .failure(
          RemoteTaskError(.outputUndecodable, message: "completed without an output", attempt: attempt))
      }
      do {
        return .success(try JSONDecoder().decode(Output.self, from: output))
      } catch {
        return .failure(
          RemoteTaskError(
            .outputUndecodable, message: "the output does not decode as \(Output.self): \(error)", attempt: attempt))
      }
    case "cancelled":
      return .failure(CancellationError())
    case "vanished":
      return .failure(
        RemoteQueueError(.taskVanished, message: "the task's row was deleted while the task waited for it"))
    default:
      let code = code.map { RemoteTaskError.Code(name: $0) } ?? .handlerFailed
      return .failure(RemoteTaskError(code, message: message ?? "failed", attempt: attempt))
    }
  }
}
