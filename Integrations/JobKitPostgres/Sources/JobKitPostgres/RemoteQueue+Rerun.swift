import Foundation
import PostgresNIO

/// Re-runs and the keys they name: what a new request with a known key does to the row, the
/// retry of failed rows, and the keys the table can store.
extension RemoteQueue {
  /// The longest idempotency key, in bytes of UTF-8, that the table's unique index can hold
  /// (beside a queue name of up to ``maxQueueNameBytes``).
  public static let maxKeyBytes = 2_000
  /// The longest queue name, in bytes of UTF-8.
  public static let maxQueueNameBytes = 500

  /// Throws ``RemoteQueueError/Code/invalidKey`` unless `key` (and this queue's name) can be
  /// stored: not empty, no NUL character, within ``maxKeyBytes`` (``maxQueueNameBytes``).
  func validate(key: String) throws {
    func check(_ value: String, _ what: String, limit: Int) throws {
      let bytes = value.utf8.count
      if value.isEmpty {
        throw RemoteQueueError(.invalidKey, message: "the \(what) is empty")
      }
      if value.utf8.contains(0) {
        throw RemoteQueueError(
          .invalidKey, message: "the \(what) contains a NUL character, which PostgreSQL text cannot hold")
      }
      if bytes > limit {
        throw RemoteQueueError(
          .invalidKey,
          message: "the \(what) is \(bytes) bytes of UTF-8, more than the \(limit) the table's index allows")
      }
    }
    try check(name, "queue name '\(name.prefix(40))…'", limit: Self.maxQueueNameBytes)
    try check(key, "idempotency key '\(key.prefix(40))…'", limit: Self.maxKeyBytes)
  }

  /// A re-run is a new request: before a task attaches to the row its key already has, a
  /// cancelled row is armed again (available, with ``Configuration/maxAttempts`` more attempts;
  /// attempt numbers go on from the last run's), and a cancel request that a running or
  /// available row still carries is withdrawn. Every attach to a row that is not final bumps the
  /// row's generation, so that a cancel from the earlier run (its process may still be going: a
  /// durable job's run whose lease was lost) misses the new run; a running row
  /// freed of its cancel request gets ``Configuration/maxAttempts`` more attempts, as its worker
  /// may have cancelled the handler already (that try then ends as a retry). A completed or
  /// failed row is left as it is: the task gets its stored outcome (``retryFailed(idempotencyKeys:)``
  /// arms failed rows again).
  ///
  /// A cancelled row armed again starts no earlier than its key's `runAfter` (seconds since
  /// 1970, 0: now), as a new row would.
  ///
  /// Returns the rows it armed again or attached to, with their new generation, by key (none is
  /// final). On `connection` if given (in the caller's transaction).
  func rearmForRerun(keys: [String], runAfter: [Double], on connection: PostgresConnection? = nil) async throws
    -> [String: RemoteInsertedRow]
  {
    let more = Int32(clamping: max(1, configuration.retryPolicy.maxAttempts))
    return try await statement(
      on: connection,
      """
      UPDATE jobkit_remote_tasks t SET generation = generation + 1, cancel_requested = false,
        state = CASE WHEN state = 'cancelled' THEN 'available' ELSE state END,
        max_attempts = CASE WHEN state = 'cancelled' THEN attempt + \(more)
          WHEN cancel_requested THEN greatest(max_attempts, attempt + \(more)) ELSE max_attempts END,
        error_message = CASE WHEN state = 'cancelled' THEN NULL ELSE error_message END,
        error_code = CASE WHEN state = 'cancelled' THEN NULL ELSE error_code END,
        finished_at = CASE WHEN state = 'cancelled' THEN NULL ELSE finished_at END,
        owner = CASE WHEN state = 'cancelled' THEN NULL ELSE owner END,
        lease_expires_at = CASE WHEN state = 'cancelled' THEN NULL ELSE lease_expires_at END,
        run_after = CASE WHEN state = 'cancelled' THEN greatest(now(), to_timestamp(r.run_after)) ELSE t.run_after END,
        suspect = CASE WHEN state = 'cancelled' THEN false ELSE suspect END
      FROM unnest(\(keys)::text[], \(runAfter)::float8[]) AS r(key, run_after)
      WHERE queue = \(name) AND idempotency_key = r.key
        AND state IN ('cancelled', 'available', 'running')
      RETURNING idempotency_key, id, generation
      """
    ) { rows in
      var armed: [String: RemoteInsertedRow] = [:]
      for try await (key, id, generation) in rows.decode((String, Int64, Int32).self) {
        armed[key] = RemoteInsertedRow(id: id, generation: generation, final: nil)
      }
      return armed
    }
  }

  /// Arms the failed rows with these keys again: available, with ``Configuration/maxAttempts``
  /// more attempts (numbered on from the last). A job that tracks a ``RemoteWork`` with one of
  /// the keys then waits for the new outcome (one tracked before gets the old failure). Returns
  /// the keys whose rows were failed and are armed now; others (unknown, running, completed)
  /// are left alone.
  public func retryFailed(idempotencyKeys keys: [String]) async throws -> [String] {
    for key in keys { try validate(key: key) }
    return try await retryingWhileUnreachable {
      try await armAgain(ids: [], keys: keys, states: ["failed"]).map(\.key)
    }
  }

  /// The one statement that arms final rows again (``retryFailed(idempotencyKeys:)``, the
  /// console's ``retryTask(id:)``): the rows of this queue with one of `ids` or `keys` whose
  /// state is one of `states` become available now, with ``Configuration/maxAttempts`` more
  /// attempts numbered on from the last, their stored outcome and cancel request cleared, and a
  /// new generation (a cancel meant for the earlier run misses this one). Returns the rows armed.
  func armAgain(ids: [Int64], keys: [String], states: [String]) async throws -> [(id: Int64, key: String)] {
    let more = Int32(clamping: max(1, configuration.retryPolicy.maxAttempts))
    return try await statement(
      """
      UPDATE jobkit_remote_tasks SET generation = generation + 1, state = 'available',
        max_attempts = attempt + \(more), output = NULL, error_message = NULL, error_code = NULL,
        finished_at = NULL, owner = NULL, lease_expires_at = NULL, run_after = now(), suspect = false,
        cancel_requested = false
      WHERE queue = \(name) AND (id = ANY(\(ids)) OR idempotency_key = ANY(\(keys)))
        AND state = ANY(\(states))
      RETURNING id, idempotency_key
      """
    ) { rows in
      var armed: [(id: Int64, key: String)] = []
      for try await (id, key) in rows.decode((Int64, String).self) { armed.append((id, key)) }
      return armed
    }
  }
}
