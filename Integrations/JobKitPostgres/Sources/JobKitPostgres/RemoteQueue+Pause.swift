import Foundation
import Logging
import PostgresNIO

/// Pausing a queue: a row in `jobkit_remote_queues` that every worker's claim statement reads,
/// so the pause holds across processes and restarts.
extension RemoteQueue {
  /// Pauses the queue: from the moment this returns, no worker's claim takes a row of it (a
  /// claim already under way may still take its rows); each worker finds out at its next
  /// claim, within one ``RemoteWorker/Configuration/pollInterval``. Tasks already running
  /// finish and store their results; jobs may go on adding tasks, which wait. Persisted: the
  /// queue stays paused until ``resume()``, whatever restarts. Pausing a paused queue changes
  /// nothing (it keeps the time of the first pause).
  public func pause() async throws {
    try await statement(
      """
      INSERT INTO jobkit_remote_queues AS q (queue, paused_at) VALUES (\(name), now())
      ON CONFLICT (queue) DO UPDATE SET paused_at = coalesce(q.paused_at, now())
      """
    ) { rows in
      for try await _ in rows {}
    }
    logger.info("queue paused", metadata: ["queue": "\(name)"])
  }

  /// Resumes a paused queue, and wakes its workers (the notification of new work), so they
  /// claim at once rather than at their next poll. Resuming a queue that runs changes nothing.
  public func resume() async throws {
    let resumed = try await statement(
      """
      WITH resumed AS (
        UPDATE jobkit_remote_queues SET paused_at = NULL
        WHERE queue = \(name) AND paused_at IS NOT NULL RETURNING queue
      )
      SELECT pg_notify('jk_' || md5(queue) || '_new', '') FROM resumed
      """
    ) { rows in
      var count = 0
      for try await _ in rows { count += 1 }
      return count > 0
    }
    if resumed {
      logger.info("queue resumed", metadata: ["queue": "\(name)"])
    }
  }

  /// Whether the queue is paused (by any process), as the database says now.
  public func isPaused() async throws -> Bool {
    try await statement(
      "SELECT EXISTS (SELECT 1 FROM jobkit_remote_queues WHERE queue = \(name) AND paused_at IS NOT NULL)"
    ) { rows in
      var paused = false
      for try await (value) in rows.decode(Bool.self) { paused = value }
      return paused
    }
  }

  /// The paused queues of the database, each with the time it was paused, in one statement
  /// (what a console shows).
  public static func pausedQueues(client: PostgresClient, logger: Logger) async throws -> [String: Date] {
    let rows = try await client.query(
      "SELECT queue, paused_at FROM jobkit_remote_queues WHERE paused_at IS NOT NULL", logger: logger)
    var paused: [String: Date] = [:]
    for try await (queue, since) in rows.decode((String, Date).self) {
      paused[queue] = since
    }
    return paused
  }
}
