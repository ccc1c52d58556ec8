import Logging
import PostgresNIO

/// The tables every queue shares, by version. A migration is a list of statements applied in one
/// transaction; `jobkit_remote_schema` records the versions applied. Append, never edit.
enum RemoteSchema {
  /// Serialises concurrent `migrate()` calls (any process): `pg_advisory_xact_lock` on it.
  static let lockKey: Int64 = 0x4A6F_624B_6974_5051

  static let migrations: [(version: Int32, statements: [PostgresQuery])] = [
    (
      1,
      [
        """
        CREATE TABLE jobkit_remote_tasks (
          id bigserial PRIMARY KEY,
          queue text NOT NULL,
          kind text NOT NULL,
          idempotency_key text NOT NULL,
          input bytea NOT NULL,
          state text NOT NULL DEFAULT 'available'
            CHECK (state IN ('available', 'running', 'completed', 'failed', 'cancelled')),
          attempt integer NOT NULL DEFAULT 0,
          max_attempts integer NOT NULL CHECK (max_attempts >= 1),
          owner text,
          lease_expires_at timestamptz,
          run_after timestamptz NOT NULL DEFAULT now(),
          cancel_requested boolean NOT NULL DEFAULT false,
          output bytea,
          error_message text,
          created_at timestamptz NOT NULL DEFAULT now(),
          finished_at timestamptz,
          UNIQUE (queue, idempotency_key)
        )
        """,
        """
        CREATE INDEX jobkit_remote_tasks_available ON jobkit_remote_tasks (queue, run_after, id)
          WHERE state = 'available'
        """,
        """
        CREATE INDEX jobkit_remote_tasks_running ON jobkit_remote_tasks (queue, lease_expires_at)
          WHERE state = 'running'
        """,
        """
        CREATE FUNCTION jobkit_remote_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.state = 'available' AND (TG_OP = 'INSERT' OR OLD.state <> 'available') THEN
            PERFORM pg_notify('jk_' || md5(NEW.queue) || '_new', '');
          ELSIF NEW.state IN ('completed', 'failed', 'cancelled')
            AND (TG_OP = 'INSERT' OR OLD.state NOT IN ('completed', 'failed', 'cancelled')) THEN
            PERFORM pg_notify('jk_' || md5(NEW.queue) || '_done', NEW.id::text);
          END IF;
          RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER jobkit_remote_notify AFTER INSERT OR UPDATE OF state ON jobkit_remote_tasks
          FOR EACH ROW EXECUTE FUNCTION jobkit_remote_notify()
        """,
      ]
    ),
    (
      2,
      [
        // error_code: a failure's RemoteTaskError code. generation: bumped when a re-run re-arms
        // the row or withdraws a cancel request, so that an older run's cancel misses the new
        // run. suspect: the lease expired (its worker died holding it): the row runs alone.
        """
        ALTER TABLE jobkit_remote_tasks
          ADD COLUMN error_code text,
          ADD COLUMN generation integer NOT NULL DEFAULT 1,
          ADD COLUMN suspect boolean NOT NULL DEFAULT false
        """,
        """
        CREATE INDEX jobkit_remote_tasks_suspect ON jobkit_remote_tasks (queue, run_after, id)
          WHERE state = 'available' AND suspect
        """,
      ]
    ),
    (
      3,
      [
        // Retention: a prune finds a queue's due rows of one final state, oldest first, without
        // reading the rows that are not final (RemoteQueue+Retention.swift).
        """
        CREATE INDEX jobkit_remote_tasks_finished ON jobkit_remote_tasks (queue, state, finished_at)
          WHERE state IN ('completed', 'failed', 'cancelled')
        """
      ]
    ),
    (
      4,
      [
        // Durable jobs (DurableScope.swift): parent_id, the row of the handler that created the
        // row, if any. A row that gets a cancel request or becomes final cancels its unfinished
        // children (and so, by the same trigger, their descendants): a finished job leaves no
        // unfinished child, and a cancel cascades whoever is alive. first_started_at: when the
        // first attempt was claimed, so that a time limit counts from it across recoveries.
        "ALTER TABLE jobkit_remote_tasks ADD COLUMN parent_id bigint, ADD COLUMN first_started_at timestamptz",
        """
        CREATE INDEX jobkit_remote_tasks_children ON jobkit_remote_tasks (parent_id)
          WHERE parent_id IS NOT NULL AND state IN ('available', 'running')
        """,
        """
        CREATE FUNCTION jobkit_remote_cascade() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE jobkit_remote_tasks SET cancel_requested = true,
            state = CASE WHEN state = 'available' THEN 'cancelled' ELSE state END,
            finished_at = CASE WHEN state = 'available' THEN now() ELSE finished_at END
          WHERE parent_id = NEW.id AND state IN ('available', 'running') AND NOT cancel_requested;
          RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER jobkit_remote_cascade AFTER UPDATE OF state, cancel_requested ON jobkit_remote_tasks
          FOR EACH ROW WHEN (
            (NEW.cancel_requested AND NOT OLD.cancel_requested)
            OR (NEW.state IN ('completed', 'failed', 'cancelled')
              AND OLD.state NOT IN ('completed', 'failed', 'cancelled')))
          EXECUTE FUNCTION jobkit_remote_cascade()
        """,
      ]
    ),
    (
      5,
      [
        // Per-queue settings (RemoteQueue+Pause.swift): a paused queue's workers claim nothing.
        """
        CREATE TABLE jobkit_remote_queues (
          queue text PRIMARY KEY,
          paused_at timestamptz
        )
        """,
        // Limits across workers (RemoteQueue+Limits.swift): per kind, running rows in all and
        // per concurrency key.
        """
        ALTER TABLE jobkit_remote_tasks ADD COLUMN concurrency_key text
        """,
        """
        CREATE TABLE jobkit_remote_limits (
          queue text NOT NULL,
          kind text NOT NULL,
          max_running integer CHECK (max_running >= 0),
          max_running_per_key integer CHECK (max_running_per_key >= 0),
          PRIMARY KEY (queue, kind)
        )
        """,
        // The console's task list, newest first, reads this index backwards and stops at its
        // page (at 200,000 rows: 0.1 ms instead of a 160 ms scan and sort).
        """
        CREATE INDEX jobkit_remote_tasks_created ON jobkit_remote_tasks (created_at, id)
        """,
        """
        CREATE INDEX jobkit_remote_tasks_running_kind ON jobkit_remote_tasks (queue, kind, concurrency_key)
          WHERE state = 'running'
        """,
        // The room each limited kind (and concurrency key) of a queue has now: a row per limited
        // kind (kind_room: NULL without a kind limit; per_key: the limit per key), a row per
        // running key (key_room). Volatile, so its count reads a snapshot taken after the lock:
        // every claim of a queue with limits holds the queue's transaction lock from here to
        // its commit, so it counts every claim before it.
        """
        CREATE FUNCTION jobkit_remote_limit_room(p_queue text)
        RETURNS TABLE (kind text, concurrency_key text, kind_room integer, per_key integer, key_room integer)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
          IF NOT EXISTS (SELECT 1 FROM jobkit_remote_limits l WHERE l.queue = p_queue) THEN
            RETURN;
          END IF;
          PERFORM pg_advisory_xact_lock(hashtextextended('jobkit_remote_limits/' || p_queue, 0));
          RETURN QUERY
            WITH running AS (
              SELECT t.kind, t.concurrency_key, count(*)::integer AS n FROM jobkit_remote_tasks t
              WHERE t.queue = p_queue AND t.state = 'running'
                AND t.kind IN (SELECT l.kind FROM jobkit_remote_limits l WHERE l.queue = p_queue)
              GROUP BY t.kind, t.concurrency_key
            )
            SELECT l.kind, NULL::text,
              CASE WHEN l.max_running IS NOT NULL THEN
                greatest(0, l.max_running - coalesce((SELECT sum(r.n) FROM running r WHERE r.kind = l.kind), 0))::integer END,
              l.max_running_per_key, NULL::integer
            FROM jobkit_remote_limits l WHERE l.queue = p_queue
            UNION ALL
            SELECT r.kind, r.concurrency_key, NULL::integer, NULL::integer, greatest(0, l.max_running_per_key - r.n)
            FROM running r JOIN jobkit_remote_limits l ON l.queue = p_queue AND l.kind = r.kind
            WHERE r.concurrency_key IS NOT NULL AND l.max_running_per_key IS NOT NULL;
        END
        $$
        """,
      ]
    ),
    (
      6,
      [
        // A job's whole tree (finished children included) for the console's task page
        // (RemoteQueue.taskTree): the index of version 4 covers unfinished children only.
        """
        CREATE INDEX jobkit_remote_tasks_parent ON jobkit_remote_tasks (parent_id) WHERE parent_id IS NOT NULL
        """
      ]
    ),
    (
      7,
      [
        // The room of each limited kind and key of a queue, counted from a fresh snapshot,
        // without a lock (the rows and columns of jobkit_remote_limit_room of version 5). In
        // PL/pgSQL, whose plans a session keeps: as a SQL function it was planned at every
        // call, 2 ms instead of 0.15.
        """
        CREATE FUNCTION jobkit_remote_limit_count(p_queue text)
        RETURNS TABLE (kind text, concurrency_key text, kind_room integer, per_key integer, key_room integer)
        LANGUAGE plpgsql VOLATILE AS $$
        BEGIN
          RETURN QUERY
          WITH running AS (
            SELECT t.kind, t.concurrency_key, count(*)::integer AS n FROM jobkit_remote_tasks t
            WHERE t.queue = p_queue AND t.state = 'running'
              AND t.kind IN (SELECT l.kind FROM jobkit_remote_limits l WHERE l.queue = p_queue)
            GROUP BY t.kind, t.concurrency_key
          )
          SELECT l.kind, NULL::text,
            CASE WHEN l.max_running IS NOT NULL THEN
              greatest(0, l.max_running - coalesce((SELECT sum(r.n) FROM running r WHERE r.kind = l.kind), 0))::integer END,
            l.max_running_per_key, NULL::integer
          FROM jobkit_remote_limits l WHERE l.queue = p_queue
          UNION ALL
          SELECT r.kind, r.concurrency_key, NULL::integer, NULL::integer, greatest(0, l.max_running_per_key - r.n)
          FROM running r JOIN jobkit_remote_limits l ON l.queue = p_queue AND l.kind = r.kind
          WHERE r.concurrency_key IS NOT NULL AND l.max_running_per_key IS NOT NULL;
        END
        $$
        """,
        // The room a claim of up to p_batch rows may fill, under the queue's advisory lock held
        // to its commit. Near a limit (or for a claim of more than 64 rows) the lock is taken
        // alone and the room is exact, as in version 5. Far from every limit it is taken shared:
        // claims run side by side, each of at most 64 rows of a kind; the room is counted after
        // the lock, so only the claims holding it then are unseen, at most max_connections - 1
        // of them, and it is lessened by what they may take (no rows: no limit in reach). The
        // proof is in the DocC article "Limits across workers". Version 5's function stays for
        // workers not yet upgraded: its exclusive lock excludes these claims.
        """
        CREATE FUNCTION jobkit_remote_limit_room(p_queue text, p_batch integer)
        RETURNS TABLE (kind text, concurrency_key text, kind_room integer, per_key integer, key_room integer)
        LANGUAGE plpgsql VOLATILE AS $$
        DECLARE
          lock_key constant bigint := hashtextextended('jobkit_remote_limits/' || p_queue, 0);
          most_per_claim constant integer := 64;
          unseen integer;
        BEGIN
          IF NOT EXISTS (SELECT 1 FROM jobkit_remote_limits l WHERE l.queue = p_queue) THEN
            RETURN;
          END IF;
          unseen := (current_setting('max_connections')::integer - 1) * most_per_claim;
          IF p_batch > most_per_claim OR EXISTS (
            SELECT 1 FROM jobkit_remote_limit_count(p_queue) c
            WHERE least(c.kind_room, c.per_key, c.key_room) < unseen + most_per_claim
          ) THEN
            PERFORM pg_advisory_xact_lock(lock_key);
            RETURN QUERY SELECT * FROM jobkit_remote_limit_count(p_queue);
            RETURN;
          END IF;
          PERFORM pg_advisory_xact_lock_shared(lock_key);
          RETURN QUERY
            WITH counted AS MATERIALIZED (SELECT * FROM jobkit_remote_limit_count(p_queue))
            SELECT c.kind, c.concurrency_key,
              CASE WHEN c.kind_room IS NOT NULL THEN greatest(0, c.kind_room - unseen) END,
              CASE WHEN c.per_key IS NOT NULL THEN greatest(0, c.per_key - unseen) END,
              CASE WHEN c.key_room IS NOT NULL THEN greatest(0, c.key_room - unseen) END
            FROM counted c
            WHERE EXISTS (SELECT 1 FROM counted n WHERE least(n.kind_room, n.per_key, n.key_room) < unseen + most_per_claim);
        END
        $$
        """,
      ]
    ),
    (
      8,
      [
        // A worker's store of a batch of outcomes (RemoteWorker+Completion.swift). A session
        // keeps a PL/pgSQL plan; each row is found by id (LATERAL, no join to hash) with seq
        // scans and hash and merge joins off, so a plan made on a small table probes the primary
        // key at any size. With p_queue, the completed results go in one notification on the
        // "done" channel before the trigger's ids (id:attempt:base64 output, up to 7,900 bytes).
        """
        CREATE FUNCTION jobkit_remote_store_outcomes(p_owner text, p_ids bigint[], p_attempts integer[],
          p_outcomes integer[], p_outputs bytea[], p_messages text[], p_delays float8[], p_codes text[],
          p_queue text)
        RETURNS TABLE (stored_id bigint, stored_state text)
        LANGUAGE plpgsql VOLATILE
        SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
        AS $$
        BEGIN
          RETURN QUERY
          WITH c AS (
            SELECT * FROM unnest($2::bigint[], $3::integer[], $4::integer[], $5::bytea[], $6::text[],
              $7::float8[], $8::text[]) AS c(id, attempt, outcome, output, message, delay, code)
            ORDER BY 1
          ), locked AS (
            -- Locked in id order, as by every multi-row update of a worker: no deadlock.
            SELECT c.* FROM c CROSS JOIN LATERAL (
              SELECT t.id FROM jobkit_remote_tasks t WHERE t.id = c.id AND t.owner = $1::text FOR UPDATE
            ) l
          ), stored AS (
            UPDATE jobkit_remote_tasks t SET
              state = CASE WHEN c.outcome = 0 THEN 'completed'
                WHEN t.cancel_requested THEN 'cancelled'
                WHEN c.outcome IN (2, 3) AND t.attempt < t.max_attempts THEN 'available' ELSE 'failed' END,
              output = CASE WHEN c.outcome = 0 THEN c.output ELSE t.output END,
              error_message = CASE WHEN c.outcome = 0 OR (c.outcome = 3 AND t.cancel_requested) THEN t.error_message
                ELSE c.message END,
              error_code = CASE WHEN c.outcome = 0 OR (c.outcome = 3 AND t.cancel_requested) THEN t.error_code
                ELSE c.code END,
              suspect = false,
              finished_at = CASE WHEN c.outcome = 0 OR t.cancel_requested
                OR NOT (c.outcome IN (2, 3) AND t.attempt < t.max_attempts) THEN now() END,
              lease_expires_at = NULL,
              run_after = CASE WHEN c.outcome = 0 THEN t.run_after ELSE now() + make_interval(secs => c.delay) END
            FROM locked c
            WHERE t.id = c.id AND t.attempt = c.attempt AND t.owner = $1::text AND t.state = 'running'
            RETURNING t.id, t.state, t.attempt, t.output
          ), results AS (
            SELECT CASE WHEN $9::text IS NOT NULL AND p.payload IS NOT NULL
              THEN pg_notify('jk_' || md5($9::text) || '_done', p.payload) END AS sent
            FROM (
              SELECT string_agg(e.entry, ' ' ORDER BY e.id) AS payload FROM (
                SELECT r.id, r.entry, sum(length(r.entry) + 1) OVER (ORDER BY length(r.entry), r.id) AS upto FROM (
                  SELECT s.id, s.id || ':' || s.attempt || ':' || translate(encode(s.output, 'base64'), E'\\n', '')
                    AS entry
                  FROM stored s WHERE s.state = 'completed' AND s.output IS NOT NULL
                ) r
              ) e
              WHERE e.upto <= 7900
            ) p
          )
          SELECT s.id, s.state FROM stored s CROSS JOIN results
          UNION ALL
          -- Rows this run and attempt stored already (an earlier try whose answer was lost).
          SELECT f.id, f.state FROM c CROSS JOIN LATERAL (
            SELECT t.id, t.state FROM jobkit_remote_tasks t
            WHERE t.id = c.id AND t.attempt = c.attempt AND t.owner = $1::text AND t.state <> 'running' OFFSET 0
          ) f;
        END
        $$
        """
      ]
    ),
    (9, [RemoteSchema.claimFunction]),
    (10, [RemoteSchema.insertFunction]),
  ]

  /// The newest version this library knows.
  static var currentVersion: Int32 { migrations.last?.version ?? 0 }

  /// Applies the missing migrations in one transaction under the advisory lock.
  static func migrate(_ client: PostgresClient, logger: Logger) async throws {
    do {
      try await migrateInTransaction(client, logger: logger)
    } catch let error as PostgresTransactionError {
      // The transaction's wrapper hides what went wrong: our own error, or the server's.
      throw error.closureError ?? error.beginError ?? error.commitError ?? error
    } catch  where "\(type(of: error))" == "ConnectionPoolError" {
      // The pool gave up making connections (after its minute of tries), whatever the reason.
      throw RemoteQueueError(
        .databaseUnreachable,
        message: "no connection to the database could be made (\(error)); "
          + "PostgresClient.Configuration.checkConnection(url:logger:) tells why")
    }
  }

  private static func migrateInTransaction(_ client: PostgresClient, logger: Logger) async throws {
    try await client.withTransaction(logger: logger) { connection in
      try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS jobkit_remote_schema (
          version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
        """, logger: logger)
      var applied: Int32 = 0
      for try await (version) in try await connection.query(
        "SELECT coalesce(max(version), 0)::integer FROM jobkit_remote_schema", logger: logger
      ).decode(Int32.self) {
        applied = version
      }
      guard applied <= currentVersion else {
        throw RemoteQueueError(
          .schemaTooNew,
          message: "the database's schema is version \(applied), newer than this library's \(currentVersion)")
      }
      for migration in migrations where migration.version > applied {
        for statement in migration.statements {
          try await connection.query(statement, logger: logger)
        }
        try await connection.query(
          "INSERT INTO jobkit_remote_schema (version) VALUES (\(migration.version))", logger: logger)
        logger.info("schema migrated", metadata: ["version": "\(migration.version)"])
      }
    }
  }
}
