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
    let claim = ClaimStatement(
      queue: queue.name, limit: Int32(clamping: limit), mayTakeSuspect: mayTakeSuspect, owner: owner,
      lease: configuration.leaseDuration.seconds)
    let claimed = try await queue.prepared(claim).compactMap { $0 }
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

/// The claim (``RemoteWorker/claim(limit:mayTakeSuspect:owner:)``), prepared once per connection:
/// the server plans it once, not on every claim. Returns each claimed row with how long it
/// waited since it became runnable, or `nil` for a row made cancelled on the way.
struct ClaimStatement: PostgresPreparedStatement {
  typealias Row = (row: RemoteWorker.ClaimedRow, waited: Double)?

  static let name = "jobkit_remote_claim_1"

  static let sql = """
    WITH paused AS (
      SELECT 1 FROM jobkit_remote_queues WHERE queue = $1 AND paused_at IS NOT NULL
    ), room AS MATERIALIZED (
      SELECT * FROM jobkit_remote_limit_room($1, $2::integer)
    ), suspect AS (
      SELECT id FROM jobkit_remote_tasks t
      WHERE NOT EXISTS (SELECT 1 FROM paused) AND $3::boolean AND queue = $1 AND state = 'available'
        AND suspect AND run_after <= now()
        AND NOT EXISTS (SELECT 1 FROM room r WHERE r.kind = t.kind AND (r.kind_room = 0 OR r.per_key = 0
          OR (r.concurrency_key = t.concurrency_key AND r.key_room = 0)))
      ORDER BY run_after, id LIMIT 1
      FOR UPDATE SKIP LOCKED
    ), next AS (
      SELECT id, kind, concurrency_key, run_after FROM jobkit_remote_tasks t
      WHERE queue = $1 AND state = 'available' AND run_after <= now() AND NOT suspect
        AND NOT EXISTS (SELECT 1 FROM suspect) AND NOT EXISTS (SELECT 1 FROM paused)
        AND ($3::boolean OR NOT EXISTS (
          SELECT 1 FROM jobkit_remote_tasks s
          WHERE s.queue = $1 AND s.state = 'available' AND s.suspect AND s.run_after <= now()))
        AND NOT EXISTS (SELECT 1 FROM room r WHERE r.kind = t.kind AND (r.kind_room = 0 OR r.per_key = 0
          OR (r.concurrency_key = t.concurrency_key AND r.key_room = 0)))
      ORDER BY run_after, id
      LIMIT (SELECT CASE WHEN EXISTS (SELECT 1 FROM room) THEN 4 * $2::bigint ELSE $2::bigint END)
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
      ORDER BY run_after, id LIMIT $2::bigint
    ), picked AS (
      SELECT id FROM suspect UNION ALL SELECT id FROM fitting
    )
    UPDATE jobkit_remote_tasks t SET
      state = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'running' END,
      attempt = CASE WHEN t.cancel_requested THEN t.attempt ELSE t.attempt + 1 END,
      owner = CASE WHEN t.cancel_requested THEN NULL ELSE $4::text END,
      lease_expires_at = CASE WHEN t.cancel_requested THEN NULL ELSE now() + make_interval(secs => $5::float8) END,
      finished_at = CASE WHEN t.cancel_requested THEN now() END,
      first_started_at = coalesce(t.first_started_at, now())
    FROM picked WHERE t.id = picked.id
    RETURNING t.id, t.kind, t.input, t.attempt, t.idempotency_key, t.suspect, t.state,
      extract(epoch FROM now() - t.run_after)::float8,
      (extract(epoch FROM now() - coalesce(t.first_started_at, now())) * 1000)::bigint
    """

  let queue: String
  let limit: Int32
  let mayTakeSuspect: Bool
  let owner: String
  /// The lease in seconds.
  let lease: Double

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 5)
    bindings.append(queue)
    bindings.append(limit)
    bindings.append(mayTakeSuspect)
    bindings.append(owner)
    bindings.append(lease)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let (id, kind, input, attempt, key, suspect, state, waited, sinceFirstStart) = try row.decode(
      (Int64, String, Data, Int32, String, Bool, String, Double, Int64).self)
    guard state == "running" else { return nil }
    return (
      RemoteWorker.ClaimedRow(
        id: id, kind: kind, input: input, attempt: Int(attempt), key: key, suspect: suspect,
        sinceFirstStart: .milliseconds(sinceFirstStart)),
      waited
    )
  }
}
