import Foundation
import Logging
import PostgresNIO

extension PostgresClient.Configuration {
  /// Opens one connection with the settings of `url`, runs `SELECT 1` and closes it: call it
  /// before ``RemoteQueue/migrate()`` to hear at once what is wrong with the settings. A
  /// `PostgresClient`'s pool retries a refused connection for a minute whatever the reason, and
  /// then says only that it gave up.
  ///
  /// - Settings the server refuses are reported at once, not retried:
  ///   ``RemoteQueueError/Code/authenticationFailed`` (the message names the user, never the
  ///   password) and ``RemoteQueueError/Code/databaseNotFound`` (it names the database).
  ///   A URL that cannot be read throws ``PostgresURLError``.
  /// - A server that cannot be reached (refused, no route, no answer) is tried again with
  ///   jittered exponential backoff until `timeout`, then reported as
  ///   ``RemoteQueueError/Code/databaseUnreachable`` naming the host and port.
  /// - Cancelling the calling task (a graceful shutdown, with `cancelWhenGracefulShutdown`)
  ///   ends the wait at once with `CancellationError`.
  public static func checkConnection(url: String, timeout: Duration = .seconds(10), logger: Logger) async throws {
    let parsed = try PostgresURL(url)
    let configuration: PostgresConnection.Configuration
    switch parsed.endpoint {
    case .unixSocket(let path):
      configuration = .init(
        unixSocketPath: path, username: parsed.username, password: parsed.password, database: parsed.database)
    case .tcp(let host, let port):
      configuration = .init(
        host: host, port: port, username: parsed.username, password: parsed.password, database: parsed.database,
        tls: try parsed.tls.map { .require(try NIOSSLContext(configuration: $0)) } ?? .disable)
    }
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var backoff = Backoff()
    while true {
      try Task.checkCancellation()
      do {
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        do {
          try await connection.query("SELECT 1", logger: logger)
        } catch {
          try? await connection.close()
          throw error
        }
        try? await connection.close()
        return
      } catch {
        if let refused = refusal(error, parsed) { throw refused }
        try Task.checkCancellation()
        guard clock.now < deadline else {
          throw RemoteQueueError(
            .databaseUnreachable,
            message: "the server at \(parsed.place) could not be reached for \(Int(timeout.seconds)) s; last error: "
              + RemoteQueue.summary(error))
        }
        let delay = min(backoff.next(), deadline - clock.now)
        logger.debug(
          "database not reachable yet; retrying",
          metadata: ["place": "\(parsed.place)", "retry-in-ms": "\(Int(delay.seconds * 1000))"])
        try await Task.sleep(for: delay)
      }
    }
  }

  /// The settings' error that `error` reports, if the server refused them: a wrong user or
  /// password, a database that does not exist.
  static func refusal(_ error: any Error, _ url: PostgresURL) -> RemoteQueueError? {
    guard let error = error as? PSQLError, let state = error.serverInfo?[.sqlState] else { return nil }
    let said = error.serverInfo?[.message].map { " (the server said: \($0))" } ?? ""
    switch state {
    case "28P01", "28000":
      return RemoteQueueError(
        .authenticationFailed,
        message: "the server at \(url.place) refused user '\(url.username)': wrong password, unknown user or "
          + "no pg_hba.conf entry\(said)")
    case "3D000":
      return RemoteQueueError(
        .databaseNotFound,
        message: "database '\(url.database ?? url.username)' does not exist on the server at \(url.place)\(said)")
    default:
      return nil
    }
  }
}
