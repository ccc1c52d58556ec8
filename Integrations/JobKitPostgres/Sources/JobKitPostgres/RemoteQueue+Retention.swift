import Foundation
import Logging
import PostgresNIO

/// Retention: finished rows are deleted once they are older than their state's period, in
/// batches, by one pruner at a time per queue.
extension RemoteQueue {
  /// How long the queue's finished rows stay in the table, per final state, and how many a
  /// prune deletes per statement. Part of ``RemoteQueue/Configuration/retention``; the
  /// queue's ``RemoteWorker``s prune every ``RemoteWorker/Configuration/pruneInterval``, and
  /// ``RemoteQueue/prune()`` prunes once.
  ///
  /// A finished row is what a re-run job finds: a task whose key has a completed row returns
  /// the stored output without running. Once the row is deleted, the key is unknown again: a
  /// job re-run with it **runs that task again**. A job still waiting for a row that was
  /// deleted gets ``RemoteQueueError/Code/taskVanished``; a job reads its row once, when it
  /// becomes final, so periods far above a job's wait are safe. Keep the periods longer than
  /// the time within which jobs may be re-run and expect their finished tasks to be skipped.
  ///
  /// A period of `nil` keeps that state's rows for ever.
  public struct Retention: Sendable, Equatable {
    /// How long a completed row stays after it finished; `nil`: for ever. 1 day by default.
    public var completed: Duration? = .seconds(86_400)
    /// How long a failed row stays after it finished; `nil`: for ever. 7 days by default.
    public var failed: Duration? = .seconds(7 * 86_400)
    /// How long a cancelled row stays after it finished; `nil`: for ever. 7 days by default.
    public var cancelled: Duration? = .seconds(7 * 86_400)
    /// The most rows one `DELETE` statement removes (its own transaction); a prune goes on
    /// with further statements until no due row is left. At least 1; 1,000 by default.
    public var batchSize: Int = 1_000

    /// The defaults: completed rows for 1 day, failed and cancelled rows for 7 days, batches of
    /// 1,000.
    public init() {}

    /// Keeps every finished row for ever: nothing is pruned.
    public static var keepForever: Retention {
      var retention = Retention()
      retention.completed = nil
      retention.failed = nil
      retention.cancelled = nil
      return retention
    }

    /// The final states with a period, and the period in seconds.
    var periods: [(state: String, seconds: Double)] {
      [("completed", completed), ("failed", failed), ("cancelled", cancelled)].compactMap { state, period in
        period.map { (state, $0.seconds) }
      }
    }

    /// Throws ``RemoteQueueError/Code/invalidConfiguration`` naming each value out of range.
    func validate() throws {
      var problems: [String] = []
      for (name, period) in [("completed", completed), ("failed", failed), ("cancelled", cancelled)] {
        if let period, period <= .zero { problems.append("\(name) \(period) is not positive (nil keeps for ever)") }
      }
      if batchSize < 1 { problems.append("batchSize \(batchSize) is below 1") }
      guard problems.isEmpty else {
        throw RemoteQueueError(
          .invalidConfiguration, message: "RemoteQueue.Retention: " + problems.joined(separator: "; "))
      }
    }
  }

  /// Deletes the queue's finished rows older than their state's period
  /// (``Configuration/retention``, by the database's clock), oldest first, in statements of at
  /// most ``Retention/batchSize`` rows, until none is due; returns how many it deleted.
  ///
  /// One pruner at a time per queue: each statement takes a transaction-level advisory lock
  /// without waiting (`pg_try_advisory_xact_lock`); when another pruner holds it, this pass
  /// ends at once (that pruner is doing the work). Rows another transaction holds locked are
  /// skipped, never waited for. Only completed, failed and cancelled rows are deleted.
  ///
  /// Workers call it on their own (``RemoteWorker/Configuration/pruneInterval``); call it
  /// yourself to prune without workers. Throws ``RemoteQueueError/Code/invalidConfiguration``
  /// for a retention out of range, and the database's errors (a statement that gets no answer
  /// within ``Configuration/statementTimeout`` throws an unreachable ``RemoteQueueError``).
  @discardableResult
  public func prune() async throws -> Int {
    let retention = configuration.retention
    try retention.validate()
    var deleted = 0
    for (state, seconds) in retention.periods {
      while true {
        guard let count = try await pruneBatch(state: state, olderThan: seconds, limit: retention.batchSize) else {
          logger.debug("another pruner is at work; this pass ends", metadata: ["queue": "\(name)"])
          return deleted
        }
        deleted += count
        logger.debug("pruned a batch", metadata: ["queue": "\(name)", "state": "\(state)", "rows": "\(count)"])
        if count < retention.batchSize { break }
      }
    }
    if deleted > 0 {
      logger.info("finished rows pruned", metadata: ["queue": "\(name)", "rows": "\(deleted)"])
    }
    return deleted
  }

  /// One statement (one transaction): deletes at most `limit` rows in `state` that finished more
  /// than `seconds` ago, oldest first, under the queue's prune lock. `nil` when another
  /// transaction holds the lock.
  private func pruneBatch(state: String, olderThan seconds: Double, limit: Int) async throws -> Int? {
    try await statement(
      """
      WITH lock AS MATERIALIZED (
        SELECT pg_try_advisory_xact_lock(hashtextextended('jobkit_remote_prune/' || \(name), 0)) AS held
      ), due AS (
        SELECT id FROM jobkit_remote_tasks
        WHERE (SELECT held FROM lock) AND queue = \(name) AND state = \(state)
          AND state IN ('completed', 'failed', 'cancelled')
          AND finished_at < now() - make_interval(secs => \(seconds))
        ORDER BY finished_at LIMIT \(Int64(limit))
        FOR UPDATE SKIP LOCKED
      ), deleted AS (
        DELETE FROM jobkit_remote_tasks t USING due WHERE t.id = due.id RETURNING t.id
      )
      SELECT (SELECT held FROM lock), (SELECT count(*) FROM deleted)::bigint
      """
    ) { rows in
      var result: Int?
      for try await (held, count) in rows.decode((Bool, Int64).self) where held {
        result = Int(count)
      }
      return result
    }
  }
}
