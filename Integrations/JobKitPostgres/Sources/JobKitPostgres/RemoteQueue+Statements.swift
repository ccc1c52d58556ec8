import Foundation
import Logging
import PostgresNIO

/// How the queue talks to the database: statements with a time limit, retries with backoff
/// while the database cannot be reached, and `LISTEN` connections that reopen.
extension RemoteQueue {
  /// Runs `query` and reads its rows with `read`, within ``Configuration/statementTimeout``.
  /// Past it, throws an unreachable ``RemoteQueueError`` (retried like a lost connection): the
  /// statement's connection is closed, which ends a statement the server does not answer.
  func statement<Result: Sendable>(
    _ query: PostgresQuery, read: @escaping @Sendable (PostgresRowSequence) async throws -> Result
  ) async throws -> Result {
    let client = client
    let logger = logger
    let connection = Locked<PostgresConnection?>(nil)
    return try await bounded {
      try await client.withConnection { leased in
        connection.withLock { $0 = leased }
        defer { connection.withLock { $0 = nil } }
        return try await read(try await leased.query(query, logger: logger))
      }
    } onTimeout: {
      connection.withLock { $0 }?.close().whenComplete { _ in }
    }
  }

  /// Runs `body` in a child task and returns its result, or throws an unreachable
  /// ``RemoteQueueError`` after ``Configuration/statementTimeout``, whichever comes first. At the
  /// timeout `body` is cancelled and `onTimeout` runs (it ends what ignores a cancel, e.g. by
  /// closing the connection); the call returns once `body` ended. Cancelling the caller cancels
  /// `body`.
  func bounded<Result: Sendable>(
    _ body: @escaping @Sendable () async throws -> Result, onTimeout: @escaping @Sendable () -> Void = {}
  ) async throws -> Result {
    let timeout = configuration.statementTimeout
    return try await withThrowingTaskGroup(of: Result?.self) { group in
      group.addTask { try await body() }
      group.addTask {
        try await Task.sleep(for: timeout)
        return nil
      }
      defer { group.cancelAll() }
      do {
        if let result = try await group.next() ?? nil {
          return result
        }
      } catch is CancellationError {
        throw CancellationError()
      }
      if Task.isCancelled { throw CancellationError() }
      group.cancelAll()
      onTimeout()
      throw RemoteQueueError(
        .databaseUnreachable, message: "a statement got no answer within \(timeout.seconds) s", transient: true)
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
