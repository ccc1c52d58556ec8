import Foundation
import Logging
import PostgresNIO

/// `remote-bench floor-worker --queue Q --batch B`: the floor the library is measured against, a
/// hand-written postgres-nio loop over the same table with the same statements as
/// `RemoteWorker`'s claim and completion: claim up to B available rows with `FOR UPDATE SKIP
/// LOCKED` (attempt counted, lease taken), run the no-op (decode the JSON input, encode it as the
/// output), complete each row with the same fenced update, all B at once; repeat until a claim
/// finds nothing. No LISTEN, no heartbeat, no rescue of expired leases, no JobKit: what is left is
/// the database's share of the work.
///
/// It connects, marks itself ready with a query the benchmark sees in `pg_stat_activity`, and
/// starts when a line arrives on standard input.
enum FloorWorker {
  static func run(queue: String, batch: Int, client: PostgresClient, logger: Logger) async throws {
    try await client.query("SELECT 1 /* remote-bench floor ready \(unescaped: queue) */", logger: logger)
    await waitForGo()
    let owner = "floor/\(UUID().uuidString.prefix(8))"
    while true {
      let rows = try await client.query(
        """
        WITH next AS (
          SELECT id FROM jobkit_remote_tasks
          WHERE queue = \(queue) AND state = 'available' AND run_after <= now() AND NOT cancel_requested
          ORDER BY run_after, id LIMIT \(Int64(batch))
          FOR UPDATE SKIP LOCKED
        )
        UPDATE jobkit_remote_tasks t SET state = 'running', attempt = t.attempt + 1, owner = \(owner),
          lease_expires_at = now() + make_interval(secs => \(30.0))
        FROM next WHERE t.id = next.id
        RETURNING t.id, t.kind, t.input, t.attempt, t.idempotency_key
        """, logger: logger)
      var claimed: [(id: Int64, input: Data, attempt: Int32)] = []
      for try await row in rows.decode((Int64, String, Data, Int32, String).self) {
        claimed.append((row.0, row.2, row.3))
      }
      if claimed.isEmpty { return }
      try await withThrowingTaskGroup(of: Void.self) { group in
        for row in claimed {
          group.addTask {
            let output = try JSONEncoder().encode(try JSONDecoder().decode(Int.self, from: row.input))
            let stored = try await client.query(
              """
              UPDATE jobkit_remote_tasks SET state = 'completed', output = \(output), lease_expires_at = NULL,
                finished_at = now()
              WHERE id = \(row.id) AND attempt = \(row.attempt) AND owner = \(owner) AND state = 'running'
              RETURNING state
              """, logger: logger)
            for try await _ in stored {}
          }
        }
        try await group.waitForAll()
      }
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
