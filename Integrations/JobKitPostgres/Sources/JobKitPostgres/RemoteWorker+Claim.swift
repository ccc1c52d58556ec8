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
/// a call of `jobkit_remote_claim` (schema version 9), whose plan the server keeps. Returns each
/// claimed row with how long it waited since it became runnable, or `nil` for a row made
/// cancelled on the way.
struct ClaimStatement: PostgresPreparedStatement {
  typealias Row = (row: RemoteWorker.ClaimedRow, waited: Double)?

  static let name = "jobkit_remote_claim_2"

  static let sql = """
    SELECT * FROM jobkit_remote_claim($1, $2, $3, $4, $5)
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
