import Foundation
import Logging
import PostgresNIO

/// `remote-bench floor-worker --queue Q --batch B`: the floor the library is measured against, a
/// hand-written postgres-nio loop over the same table with the same statements as
/// `RemoteWorker`'s claim and completion: claim up to B available rows with `FOR UPDATE SKIP
/// LOCKED` (attempt counted, lease taken), run the no-op (decode the JSON input, encode it as the
/// output), complete the B rows with the same fenced batch update (one statement); repeat until
/// a claim finds nothing. No LISTEN, no heartbeat, no rescue of expired leases, no JobKit: what is left is
/// the database's share of the work.
///
/// Both statements are prepared once per connection, as the library's are.
///
/// It connects, marks itself ready with a query the benchmark sees in `pg_stat_activity`, and
/// starts when a line arrives on standard input; once a claim finds nothing, it ends at the next
/// line.
enum FloorWorker {
  static func run(queue: String, batch: Int, client: PostgresClient, logger: Logger) async throws {
    try await client.query("SELECT 1 /* remote-bench floor ready \(unescaped: queue) */", logger: logger)
    await waitForGo()
    let owner = "floor/\(UUID().uuidString.prefix(8))"
    while true {
      var claimed: [(id: Int64, input: Data, attempt: Int32)] = []
      for try await row in try await client.execute(
        FloorClaim(queue: queue, batch: Int64(batch), owner: owner), logger: logger)
      {
        claimed.append(row)
      }
      if claimed.isEmpty {
        // Ends when told, so that the benchmark reads its CPU time while it runs.
        await waitForGo()
        return
      }
      var ids: [Int64] = []
      var attempts: [Int32] = []
      var outputs: [ByteBuffer] = []
      for row in claimed {
        ids.append(row.id)
        attempts.append(row.attempt)
        outputs.append(ByteBuffer(bytes: try JSONEncoder().encode(try JSONDecoder().decode(Int.self, from: row.input))))
      }
      // RemoteWorker's completion statement, every outcome a success.
      let stored = try await client.execute(
        FloorStore(owner: owner, ids: ids, attempts: attempts, outputs: outputs), logger: logger)
      for try await _ in stored {}
    }
  }

  /// Waits for a line on standard input (read on a thread of its own, not a Swift concurrency
  /// thread).
  private static func waitForGo() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      Thread.detachNewThread {
        _ = readLine()
        continuation.resume()
      }
    }
  }
}

/// The floor's claim: up to `batch` available rows, oldest first, attempt counted, lease taken.
private struct FloorClaim: PostgresPreparedStatement {
  typealias Row = (id: Int64, input: Data, attempt: Int32)

  static let name = "remote_bench_floor_claim"

  static let sql = """
    WITH next AS (
      SELECT id FROM jobkit_remote_tasks
      WHERE queue = $1 AND state = 'available' AND run_after <= now() AND NOT cancel_requested
      ORDER BY run_after, id LIMIT $2
      FOR UPDATE SKIP LOCKED
    )
    UPDATE jobkit_remote_tasks t SET state = 'running', attempt = t.attempt + 1, owner = $3,
      lease_expires_at = now() + make_interval(secs => 30.0)
    FROM next WHERE t.id = next.id
    RETURNING t.id, t.kind, t.input, t.attempt, t.idempotency_key
    """

  let queue: String
  let batch: Int64
  let owner: String

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 3)
    bindings.append(queue)
    bindings.append(batch)
    bindings.append(owner)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let (id, _, input, attempt, _) = try row.decode((Int64, String, Data, Int32, String).self)
    return (id, input, attempt)
  }
}

/// The floor's completion: `RemoteWorker`'s fenced batch update, every outcome a success.
private struct FloorStore: PostgresPreparedStatement {
  typealias Row = (Int64, String)

  static let name = "remote_bench_floor_store"

  static let sql = """
    WITH c AS (
      SELECT * FROM unnest($2::bigint[], $3::integer[], $4::integer[], $5::bytea[], $6::text[], $7::float8[])
        AS c(id, attempt, outcome, output, message, delay)
    ), locked AS (
      -- Locked in id order, as by every multi-row update of a worker: no deadlock.
      SELECT t.id FROM jobkit_remote_tasks t JOIN c ON t.id = c.id WHERE t.owner = $1
      ORDER BY t.id FOR UPDATE OF t
    ), stored AS (
      UPDATE jobkit_remote_tasks t SET
        state = CASE WHEN c.outcome = 0 THEN 'completed'
          WHEN t.cancel_requested THEN 'cancelled'
          WHEN c.outcome IN (2, 3) AND t.attempt < t.max_attempts THEN 'available' ELSE 'failed' END,
        output = CASE WHEN c.outcome = 0 THEN c.output ELSE t.output END,
        error_message = CASE WHEN c.outcome = 0 OR (c.outcome = 3 AND t.cancel_requested) THEN t.error_message
          ELSE c.message END,
        finished_at = CASE WHEN c.outcome = 0 OR t.cancel_requested
          OR NOT (c.outcome IN (2, 3) AND t.attempt < t.max_attempts) THEN now() END,
        lease_expires_at = NULL,
        run_after = CASE WHEN c.outcome = 0 THEN t.run_after ELSE now() + make_interval(secs => c.delay) END
      FROM c JOIN locked ON locked.id = c.id
      WHERE t.id = c.id AND t.attempt = c.attempt AND t.owner = $1 AND t.state = 'running'
      RETURNING t.id, t.state
    )
    SELECT id, state FROM stored
    UNION ALL
    SELECT t.id, t.state FROM jobkit_remote_tasks t JOIN c ON t.id = c.id AND t.attempt = c.attempt
    WHERE t.owner = $1 AND t.state <> 'running'
    """

  let owner: String
  let ids: [Int64]
  let attempts: [Int32]
  let outputs: [ByteBuffer]

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 7)
    bindings.append(owner)
    bindings.append(ids)
    bindings.append(attempts)
    bindings.append([Int32](repeating: 0, count: ids.count))
    bindings.append(outputs)
    bindings.append([String](repeating: "", count: ids.count))
    bindings.append([Double](repeating: 0, count: ids.count))
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    try row.decode(Row.self)
  }
}
