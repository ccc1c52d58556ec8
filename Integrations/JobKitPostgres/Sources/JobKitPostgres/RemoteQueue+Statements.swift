import Foundation
import Logging
import PostgresNIO

/// How the queue talks to the database: statements with a time limit, retries with backoff
/// while the database cannot be reached, and `LISTEN` connections that reopen.
extension RemoteQueue {
  /// Runs `query` and reads its rows with `read`, within ``Configuration/statementTimeout``.
  /// Past it, throws an unreachable ``RemoteQueueError`` (retried like a lost connection) and
  /// closes the statement's connection, which ends the statement (see ``bounded(_:)``).
  func statement<Result: Sendable>(
    _ query: PostgresQuery, read: @escaping @Sendable (PostgresRowSequence) async throws -> Result
  ) async throws -> Result {
    let logger = logger
    return try await bounded { connection in try await read(try await connection.query(query, logger: logger)) }
  }

  /// Runs `body` on a connection of the client's pool and returns its result, or throws an
  /// unreachable ``RemoteQueueError`` after ``Configuration/statementTimeout`` (the wait for the
  /// connection included), whichever comes first; cancelling the caller throws
  /// `CancellationError`. Either way the connection `body` holds is closed, so that a statement
  /// without an answer (a server gone mid-statement, a lock held) fails at once: `body` runs in
  /// a child task, and the caller returns when it ended.
  func bounded<Result: Sendable>(
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    let timeout = configuration.statementTimeout
    let client = client
    let lease = StatementLease()
    return try await withThrowingTaskGroup(of: Result?.self) { group in
      group.addTask {
        try await client.withConnection { connection in
          try lease.start(connection)
          defer { lease.end() }
          return try await body(connection)
        }
      }
      group.addTask {
        try await Task.sleep(for: timeout)
        return nil
      }
      let first: Result?
      do {
        first = try await group.next() ?? nil
      } catch {
        lease.abandon()
        group.cancelAll()
        throw Task.isCancelled ? CancellationError() : error
      }
      if first == nil { lease.abandon() }
      group.cancelAll()
      guard let first else {
        throw RemoteQueueError(
          .databaseUnreachable, message: "a statement got no answer within \(timeout.seconds) s", transient: true)
      }
      return first
    }
  }

  /// Runs `body`, again while it fails because the database cannot be reached (or did not
  /// answer in time), with jittered exponential backoff, for at most `limit` (by default
  /// ``Configuration/reconnectTimeout``), then throws ``RemoteQueueError`` saying so. Other
  /// errors are thrown at once.
  func retryingWhileUnreachable<Result: Sendable>(
    for limit: Duration? = nil, _ body: @Sendable () async throws -> Result
  ) async throws -> Result {
    let clock = ContinuousClock()
    let limit = limit ?? configuration.reconnectTimeout
    let deadline = clock.now + limit
    var backoff = Backoff()
    // Logged at info once, then at debug per retry.
    var retried = false
    while true {
      do {
        return try await body()
      } catch {
        guard RemoteQueue.isUnreachable(error), !Task.isCancelled else { throw error }
        guard clock.now < deadline else {
          throw RemoteQueueError(
            .databaseUnreachable,
            message: "queue '\(name)': the database could not be reached for "
              + "\(Int(limit.seconds)) s; last error: "
              + RemoteQueue.summary(error))
        }
        let delay = backoff.next()
        logger.log(
          level: retried ? .debug : .info, "database unreachable; retrying",
          metadata: [
            "queue": "\(name)", "error": "\(String(reflecting: error))",
            "retry-in-ms": "\(Int(delay.seconds * 1000))",
          ])
        retried = true
        try await Task.sleep(for: delay)
      }
    }
  }

  /// Listens on the queue's "new" channel (`done == false`) or "done" channel until the calling
  /// task is cancelled, reopening the connection with jittered exponential backoff after it
  /// ends. `onListening` runs each time the `LISTEN` took effect (notifications sent before
  /// are lost: look everything up then), `onNotification` with each payload.
  func listen(
    done: Bool, logger: Logger, onListening: @Sendable () -> Void, onNotification: @Sendable (String) -> Void
  ) async {
    var backoff = Backoff()
    while !Task.isCancelled {
      do {
        let channels = try await channels()
        try await client.withConnection { connection in
          try await connection.listen(on: done ? channels.done : channels.new) { notifications in
            backoff.reset()
            onListening()
            for try await notification in notifications {
              onNotification(notification.payload)
            }
          }
        }
      } catch {
        if Task.isCancelled { return }
        logger.info(
          "a LISTEN connection ended; reconnecting",
          metadata: ["queue": "\(name)", "error": "\(String(reflecting: error))"])
      }
      try? await Task.sleep(for: backoff.next())
    }
  }

  /// Whether `error` says the server could not be reached, went away or did not answer in time
  /// (as opposed to a statement the server refused): connection errors, a statement past
  /// ``Configuration/statementTimeout``, and the server's classes 08 (connection exception),
  /// 57 (operator intervention: shutdown, starting up) and 40 (transaction rollback: a
  /// deadlock, a serialization failure).
  static func isUnreachable(_ error: any Error) -> Bool {
    if let error = error as? RemoteQueueError { return error.isTransient }
    guard let error = error as? PSQLError else { return false }
    switch error.code {
    case .connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection:
      return true
    case .server:
      let state = error.serverInfo?[.sqlState] ?? ""
      // 40: a deadlock or a serialization failure, rolled back: trying again is right.
      return state.hasPrefix("08") || state.hasPrefix("57") || state.hasPrefix("40")
    default:
      return false
    }
  }

  /// `error` in words for a message a user sees: what failed, never the connection's settings.
  static func summary(_ error: any Error) -> String {
    guard let error = error as? PSQLError else { return String(describing: error) }
    if let message = error.serverInfo?[.message] {
      return "\(error.code): \(message)"
    }
    return "\(error.code)"
  }
}

/// Jittered exponential backoff: 100 ms, then twice as long each time, at most 5 s, each wait
/// moved at random by up to ±50%.
struct Backoff {
  private var attempt = 0

  /// The next wait.
  mutating func next() -> Duration {
    let base = min(5.0, 0.1 * pow(2, Double(min(attempt, 10))))
    attempt += 1
    return .milliseconds(Int(base * 1000 * Double.random(in: 0.5...1.5)))
  }

  /// Starts again from the shortest wait (after a success).
  mutating func reset() {
    attempt = 0
  }
}

/// The connection a bounded statement holds, for its deadline to close. Only state under the
/// lock; the connection is closed outside it.
final class StatementLease: Sendable {
  private struct State {
    var connection: PostgresConnection?
    var abandoned = false
  }

  private let state = Locked(State())

  /// `connection` runs the statement now; throws `CancellationError` if the statement was
  /// abandoned while it waited for the connection.
  func start(_ connection: PostgresConnection) throws {
    let abandoned = state.withLock { state -> Bool in
      if !state.abandoned { state.connection = connection }
      return state.abandoned
    }
    if abandoned { throw CancellationError() }
  }

  /// The statement ended: its connection goes back to the pool.
  func end() {
    state.withLock { $0.connection = nil }
  }

  /// Nobody waits for the statement any more: closes its connection, which fails the statement
  /// if it still runs (the pool opens another).
  func abandon() {
    let connection = state.withLock { state -> PostgresConnection? in
      state.abandoned = true
      defer { state.connection = nil }
      return state.connection
    }
    if let connection {
      let _: EventLoopFuture<Void> = connection.close()
    }
  }
}
