import Foundation
import PostgresNIO

/// The worker's claim statement: a pause, and the limits across workers, are the database's.
extension RemoteWorker {
  /// Claims up to `limit` available rows, oldest first; with `mayTakeSuspect`, a suspect row
  /// instead, alone. Without it, claims nothing while a suspect row waits, so that this worker's
  /// handlers end and it can take the suspect. A row whose job asked for a cancel (handed back
  /// before its worker saw the request) is made cancelled on the way, never skipped.
  ///
  /// A paused queue (``RemoteQueue/pause()``) gives nothing. In a queue with limits
  /// (``RemoteQueue/setLimits(_:forKind:)``), the statement holds the queue's transaction lock
  /// from its count of the running rows (`jobkit_remote_limit_room`, a fresh snapshot) to its
  /// commit: alone near a limit, so two claims never both fill the same room; shared far from
  /// every limit, with the room lessened by what the other claims may take (no rows: nothing
  /// to hold back). Given rooms, it looks at up to 4 × `limit` rows past those of full kinds
  /// and keys, and takes those that fit.
  func claim(limit: Int, mayTakeSuspect: Bool, owner: String) async throws -> [ClaimedRow] {
    let lease = configuration.leaseDuration.seconds
    let limit = Int64(limit)
    let name = queue.name
    let claimed = try await queue.statement(
      """
      WITH paused AS (
        SELECT 1 FROM jobkit_remote_queues WHERE queue = \(name) AND paused_at IS NOT NULL
      ), room AS MATERIALIZED (
        SELECT * FROM jobkit_remote_limit_room(\(name), \(Int32(clamping: limit))::integer)
      ), suspect AS (
        SELECT id FROM jobkit_remote_tasks t
        WHERE NOT EXISTS (SELECT 1 FROM paused) AND \(mayTakeSuspect) AND queue = \(name) AND state = 'available'
          AND suspect AND run_after <= now()
          AND NOT EXISTS (SELECT 1 FROM room r WHERE r.kind = t.kind AND (r.kind_room = 0 OR r.per_key = 0
            OR (r.concurrency_key = t.concurrency_key AND r.key_room = 0)))
        ORDER BY run_after, id LIMIT 1
        FOR UPDATE SKIP LOCKED
      ), next AS (
        SELECT id, kind, concurrency_key, run_after FROM jobkit_remote_tasks t
        WHERE queue = \(name) AND state = 'available' AND run_after <= now() AND NOT suspect
          AND NOT EXISTS (SELECT 1 FROM suspect) AND NOT EXISTS (SELECT 1 FROM paused)
          AND (\(mayTakeSuspect) OR NOT EXISTS (
            SELECT 1 FROM jobkit_remote_tasks s
            WHERE s.queue = \(name) AND s.state = 'available' AND s.suspect AND s.run_after <= now()))
          AND NOT EXISTS (SELECT 1 FROM room r WHERE r.kind = t.kind AND (r.kind_room = 0 OR r.per_key = 0
            OR (r.concurrency_key = t.concurrency_key AND r.key_room = 0)))
        ORDER BY run_after, id
        LIMIT (SELECT CASE WHEN EXISTS (SELECT 1 FROM room) THEN 4 * \(limit) ELSE \(limit) END)
        FOR UPDATE SKIP LOCKED
      ), fitting AS (
        SELECT id FROM (
          SELECT n.id, n.run_after, n.concurrency_key, k.kind_room, k.per_key, c.key_room,
            row_number() OVER (PARTITION BY n.kind ORDER BY n.run_after, n.id) AS kind_rank,
            row_number() OVER (PARTITION BY n.kind, n.concurrency_key ORDER BY n.run_after, n.id) AS key_rank
          FROM next n
          LEFT JOIN room k ON k.kind = n.kind AND k.concurrency_key IS NULL
          LEFT JOIN room c ON c.kind = n.kind AND c.concurrency_key = n.concurrency_key
        ) ranked
        WHERE (kind_room IS NULL OR kind_rank <= kind_room)
          AND (concurrency_key IS NULL OR per_key IS NULL OR key_rank <= coalesce(key_room, per_key))
        ORDER BY run_after, id LIMIT \(limit)
      ), picked AS (
        SELECT id FROM suspect UNION ALL SELECT id FROM fitting
      )
      UPDATE jobkit_remote_tasks t SET
        state = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'running' END,
        attempt = CASE WHEN t.cancel_requested THEN t.attempt ELSE t.attempt + 1 END,
        owner = CASE WHEN t.cancel_requested THEN NULL ELSE \(owner) END,
        lease_expires_at = CASE WHEN t.cancel_requested THEN NULL ELSE now() + make_interval(secs => \(lease)) END,
        finished_at = CASE WHEN t.cancel_requested THEN now() END,
        first_started_at = coalesce(t.first_started_at, now())
      FROM picked WHERE t.id = picked.id
      RETURNING t.id, t.kind, t.input, t.attempt, t.idempotency_key, t.suspect, t.state,
        extract(epoch FROM now() - t.run_after)::float8,
        (extract(epoch FROM now() - coalesce(t.first_started_at, now())) * 1000)::bigint
      """
    ) { rows in
      var claimed: [(row: ClaimedRow, waited: Double)] = []
      for try await row in rows.decode((Int64, String, Data, Int32, String, Bool, String, Double, Int64).self)
      where row.6 == "running" {
        claimed.append(
          (
            ClaimedRow(
              id: row.0, kind: row.1, input: row.2, attempt: Int(row.3), key: row.4, suspect: row.5,
              sinceFirstStart: .milliseconds(row.8)), row.7
          ))
      }
      return claimed
    }
    for (row, waited) in claimed {
      metrics.claimed(kind: row.kind, waitedSeconds: waited)
    }
    state.withLock { state in
      state.statistics.claimed += claimed.count
      state.claimStatements += 1
    }
    return claimed.map(\.row)
  }
}
