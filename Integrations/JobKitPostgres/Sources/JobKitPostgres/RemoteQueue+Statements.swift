import Foundation
import Logging
import PostgresNIO

/// How the queue talks to the database: statements with a time limit, retries with backoff
/// while the database cannot be reached, and `LISTEN` connections that reopen.
extension RemoteQueue {
  /// Runs `query` and reads its rows with `read`, within ``Configuration/statementTimeout``.
  /// Past it, throws an unreachable ``RemoteQueueError`` (retried like a lost connection) and
  /// cancels the statement; a statement that ignores the cancel is left to end on its own.
  func statement<Result: Sendable>(
    timeLimit: Duration? = nil, _ query: PostgresQuery,
    read: @escaping @Sendable (PostgresRowSequence) async throws -> Result
  ) async throws -> Result {
    let client = client
    let logger = logger
    return try await bounded(timeLimit: timeLimit) { try await read(try await client.query(query, logger: logger)) }
  }

  /// Runs `body` in a task of its own and returns its result, or throws an unreachable
  /// ``RemoteQueueError`` after `timeLimit` (by default ``Configuration/statementTimeout``),
  /// whichever comes first. Cancelling the caller cancels `body` and throws `CancellationError`
  /// at once.
  func bounded<Result: Sendable>(
    timeLimit: Duration? = nil, _ body: @escaping @Sendable () async throws -> Result
  ) async throws -> Result {
    let timeout = timeLimit ?? configuration.statementTimeout
    let race = StatementRace<Result>()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Result, any Error>) in
        race.attach(continuation)
        race.add(
          Task {  // statement-race: outlives a stuck statement
            do {
              race.finish(.success(try await body()))
            } catch {
              race.finish(.failure(error))
            }
          })
        race.add(
          Task {  // statement-race: outlives a stuck statement
            do {
              try await Task.sleep(for: timeout)
            } catch {
              return
            }
            race.finish(
              .failure(
                RemoteQueueError(
                  .databaseUnreachable, message: "a statement got no answer within \(timeout.seconds) s",
                  transient: true)))
          })
      }
    } onCancel: {
      race.finish(.failure(CancellationError()))
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

/// A statement against its time limit: the first of the two to finish resumes the caller, and
/// the other is cancelled. Only state under the lock; the caller is resumed outside it.
final class StatementRace<Result: Sendable>: Sendable {
  private struct State {
    var continuation: CheckedContinuation<Result, any Error>?
    var early: Swift.Result<Result, any Error>?
    var finished = false
    var tasks: [Task<Void, Never>] = []
  }

  private let state = Locked(State())

  /// The caller to resume (an outcome that came first is delivered at once).
  func attach(_ continuation: CheckedContinuation<Result, any Error>) {
    let early = state.withLock { state -> Swift.Result<Result, any Error>? in
      if let early = state.early {
        state.early = nil
        return early
      }
      state.continuation = continuation
      return nil
    }
    if let early { continuation.resume(with: early) }
  }

  /// A racing task, cancelled once the race is decided.
  func add(_ task: Task<Void, Never>) {
    let decided = state.withLock { state -> Bool in
      if state.finished { return true }
      state.tasks.append(task)
      return false
    }
    if decided { task.cancel() }
  }

  /// Decides the race with `outcome` if nothing decided it yet.
  func finish(_ outcome: Swift.Result<Result, any Error>) {
    let (continuation, tasks) = state.withLock {
      state -> (CheckedContinuation<Result, any Error>?, [Task<Void, Never>]) in
      guard !state.finished else { return (nil, []) }
      state.finished = true
      defer { state.tasks = [] }
      guard let continuation = state.continuation else {
        state.early = outcome
        return (nil, state.tasks)
      }
      state.continuation = nil
      return (continuation, state.tasks)
    }
    for task in tasks { task.cancel() }
    continuation?.resume(with: outcome)
  }
}
