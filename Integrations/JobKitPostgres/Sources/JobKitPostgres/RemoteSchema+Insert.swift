import PostgresNIO

extension RemoteSchema {
  /// Version 10: the job's insert of a batch of rows as a function (`jobkit_remote_insert_rows`,
  /// called by `InsertRowsStatement`). A session keeps a PL/pgSQL plan; each key's earlier row
  /// is found by one probe of the (queue, key) index, with sequential scans and hash and merge
  /// joins off in its `SET` clause, so that a plan made on a small table does not read the
  /// queue's rows (or the table) at each batch as the table grows.
  static let insertFunction: PostgresQuery = """
    CREATE FUNCTION jobkit_remote_insert_rows(p_queue text, p_kinds text[], p_keys text[], p_inputs bytea[],
      p_max_attempts integer, p_run_after float8[], p_concurrency_keys text[], p_parents bigint[])
    RETURNS TABLE (row_id bigint, row_key text, row_generation integer, row_is_new boolean, row_state text,
      row_output bytea, row_message text, row_attempt integer, row_code text)
    LANGUAGE plpgsql VOLATILE
    SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
    AS $$
    BEGIN
      RETURN QUERY
      WITH input AS (
        SELECT * FROM unnest($2::text[], $3::text[], $4::bytea[], $6::float8[], $7::text[], $8::bigint[])
          AS i(kind, key, input, run_after, ck, parent)
      ), inserted AS (
        INSERT INTO jobkit_remote_tasks AS n
          (queue, kind, idempotency_key, input, max_attempts, run_after, concurrency_key, parent_id)
        SELECT $1, i.kind, i.key, i.input, $5, greatest(now(), to_timestamp(i.run_after)), nullif(i.ck, ''),
          nullif(i.parent, 0)
        FROM input i
        ON CONFLICT (queue, idempotency_key) DO NOTHING
        RETURNING n.id, n.idempotency_key, n.generation
      )
      SELECT n.id, n.idempotency_key, n.generation, true, 'available'::text, NULL::bytea, NULL::text, 0,
        NULL::text
      FROM inserted n
      UNION ALL
      -- The statement's snapshot: rows that existed before it (a row another transaction
      -- inserted meanwhile is looked up again by the caller).
      SELECT t.id, t.idempotency_key, t.generation, false, t.state, t.output, t.error_message, t.attempt,
        t.error_code
      FROM unnest($3::text[]) AS k(key) CROSS JOIN LATERAL (
        SELECT * FROM jobkit_remote_tasks e WHERE e.queue = $1 AND e.idempotency_key = k.key OFFSET 0
      ) t;
    END
    $$
    """
}
