import PostgresNIO

extension RemoteSchema {
  /// Version 9: the worker's claim as a function (`jobkit_remote_claim`, called by
  /// `ClaimStatement`). A session keeps a PL/pgSQL plan, and a generic plan made after an
  /// `ANALYZE` of a small table read it whole (the suspect rows, and the update of the picked
  /// rows joined by hash); with sequential scans and hash and merge joins off in its `SET`
  /// clause, the plan reads the partial indexes and probes the primary key at any size.
  static let claimFunction: PostgresQuery = """
    CREATE FUNCTION jobkit_remote_claim(p_queue text, p_limit integer, p_may_take_suspect boolean, p_owner text,
      p_lease float8)
    RETURNS TABLE (claimed_id bigint, claimed_kind text, claimed_input bytea, claimed_attempt integer,
      claimed_key text, claimed_suspect boolean, claimed_state text, waited float8, since_first_start bigint)
    LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
    AS $$
    BEGIN
      RETURN QUERY
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
          (extract(epoch FROM now() - coalesce(t.first_started_at, now())) * 1000)::bigint;
    END
    $$
    """
}
