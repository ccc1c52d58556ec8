import Foundation
import Logging
import PostgresNIO

/// The starts of ``RemoteWork``s: batched by ``RemoteInsertBatcher``, each batch one prepared
/// statement (and so one `NOTIFY` for the workers, whatever its row count).
extension RemoteQueue {
  /// The most rows in one insert statement.
  static let insertBatchRows = 1_000
  /// The most bytes of input in one insert statement (a larger row goes alone).
  static let insertBatchBytes = 8 << 20

  /// Inserts the task's row, or attaches to the row its key already has (re-armed first if it
  /// was cancelled, see ``rearmForRerun(keys:on:)``), with the starts that arrive together. Returns
  /// the row's id, its generation and, if that row is final, its outcome.
  func insert(
    kind: String, key: String, input: Data, runAfter: Date? = nil, concurrencyKey: String? = nil,
    parentID: Int64 = 0
  ) async throws -> (id: Int64, generation: Int32, final: RemoteRow?) {
    let row = RemoteNewRow(
      kind: kind, key: key, input: input, runAfter: runAfter, concurrencyKey: concurrencyKey ?? "",
      parentID: parentID,
      deadline: ContinuousClock.now + configuration.reconnectTimeout)
    let inserted = try await inserts.insert(row) { rows in
      try await self.insertBatch(rows)
    }
    return (inserted.id, inserted.generation, inserted.final)
  }

  /// Inserts `rows` in one statement, again while the database cannot be reached (until the
  /// earliest of their deadlines: a start waits at most ``Configuration/reconnectTimeout`` in
  /// all, its batch's wait included; at least one more second), and returns each row's outcome. A batch the server
  /// refuses is split in halves, each sent again, so that a row the server refuses fails alone.
  /// Throws only `CancellationError`, when the calling task was cancelled first.
  func insertBatch(_ rows: [RemoteNewRow]) async throws -> [Result<RemoteInsertedRow, any Error>] {
    do {
      let deadline = rows.map(\.deadline).min() ?? .now
      let limit = max(deadline - ContinuousClock.now, .seconds(1))
      let found = try await retryingWhileUnreachable(for: limit) { try await self.insertRows(rows) }
      return rows.map { row in
        found[row.key].map { .success($0) }
          ?? .failure(
            RemoteQueueError(.taskVanished, message: "the row of key '\(row.key)' vanished while attaching to it"))
      }
    } catch {
      if Task.isCancelled { throw CancellationError() }
      // Unreachable for too long (or a statement without answer): the same for every half.
      guard rows.count > 1, !(error is RemoteQueueError), !RemoteQueue.isUnreachable(error) else {
        return rows.map { _ in .failure(error) }
      }
      let middle = rows.count / 2
      return try await insertBatch(Array(rows[..<middle])) + insertBatch(Array(rows[middle...]))
    }
  }

  /// One try at `rows`: the rows by key. A key that had a row already is a re-run: its row is
  /// re-armed if it was cancelled (``rearmForRerun(keys:on:)``). A key whose row another
  /// transaction inserted while this statement ran is looked up by a further statement. With a
  /// `connection`, every statement runs on it (in the caller's transaction, without time limit).
  func insertRows(_ rows: [RemoteNewRow], on connection: PostgresConnection? = nil) async throws -> [String:
    RemoteInsertedRow]
  {
    let insert = InsertRowsStatement(
      queue: name, kinds: rows.map(\.kind), keys: rows.map(\.key), inputs: rows.map(\.input),
      runAfter: rows.map { $0.runAfter?.timeIntervalSince1970 ?? 0 },
      maxAttempts: Int32(clamping: max(1, configuration.retryPolicy.maxAttempts)),
      concurrencyKeys: rows.map(\.concurrencyKey), parents: rows.map(\.parentID))
    var found: [String: RemoteInsertedRow] = [:]
    var attached: [String] = []
    let returned = try await prepared(insert, on: connection)
    // A row this statement inserted is the key's row, even if the statement's snapshot still
    // shows an earlier finished row of the key that a prune deleted meanwhile.
    let insertedKeys = Set(returned.filter(\.isNew).map(\.key))
    for row in returned where row.isNew || !insertedKeys.contains(row.key) {
      found[row.key] = RemoteInsertedRow(
        id: row.id, generation: row.generation, final: row.row.isFinal ? row.row : nil)
      if !row.isNew { attached.append(row.key) }
    }
    if !attached.isEmpty {
      var runAfter: [String: Double] = [:]
      for row in rows { runAfter[row.key] = row.runAfter?.timeIntervalSince1970 ?? 0 }
      let armed = try await rearmForRerun(
        keys: attached, runAfter: attached.map { runAfter[$0] ?? 0 }, on: connection)
      for key in attached {
        if let row = armed[key] {
          found[key] = row
        } else if found[key]?.final?.state == "cancelled" {
          // Seen cancelled by this statement's snapshot, but another start re-armed it first:
          // read it again (below) rather than report a cancel that no longer holds.
          found[key] = nil
        }
      }
    }
    let missing = Array(Set(rows.map(\.key)).subtracting(found.keys))
    guard !missing.isEmpty else { return found }
    // Rows another transaction inserted meanwhile: a re-run of theirs, or a race between two
    // first starts; either way attached to as they are.
    let existing = try await statement(
      on: connection,
      """
      SELECT id, idempotency_key, state, output, error_message, attempt, error_code, generation
      FROM jobkit_remote_tasks WHERE queue = \(name) AND idempotency_key = ANY(\(missing))
      """
    ) { rows in
      var existing: [(String, RemoteInsertedRow)] = []
      for try await row in rows.decode((Int64, String, String, Data?, String?, Int32, String?, Int32).self) {
        let stored = RemoteRow(state: row.2, output: row.3, message: row.4, attempt: Int(row.5), code: row.6)
        existing.append((row.1, RemoteInsertedRow(id: row.0, generation: row.7, final: stored.isFinal ? stored : nil)))
      }
      return existing
    }
    for (key, row) in existing {
      found[key] = row
    }
    return found
  }

  /// Runs the prepared `statement` (prepared once per connection) and reads its rows, within
  /// ``Configuration/statementTimeout`` (see ``statement(_:read:)``); on `connection` if given,
  /// without time limit.
  func prepared<Statement: PostgresPreparedStatement>(
    _ statement: Statement, on connection: PostgresConnection? = nil
  ) async throws -> [Statement.Row]
  where Statement.Row: Sendable {
    if let connection {
      var rows: [Statement.Row] = []
      for try await row in try await connection.execute(statement, logger: logger) {
        rows.append(row)
      }
      return rows
    }
    let client = client
    let logger = logger
    return try await bounded {
      var rows: [Statement.Row] = []
      for try await row in try await client.execute(statement, logger: logger) {
        rows.append(row)
      }
      return rows
    }
  }

  /// Runs `statement`'s SQL unprepared, planned for its values at each call, within
  /// ``Configuration/statementTimeout``. For statements that find rows by id: a plan cached
  /// while the table was small scans the whole table, and a connection would keep it as the
  /// table grows (a store of 16 rows, with the plan made at 900 rows: 104 ms at 20,900).
  func planned<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row]
  where Statement.Row: Sendable {
    let query = PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings())
    let client = client
    let logger = logger
    return try await bounded {
      var rows: [Statement.Row] = []
      for try await row in try await client.query(query, logger: logger) {
        rows.append(try statement.decodeRow(row))
      }
      return rows
    }
  }
}

/// Inserts a batch of rows of one queue, one `NOTIFY` for all (the trigger's notifications of a
/// transaction are one when alike), and returns, for each key, the row inserted or, for a key
/// that had a row already, that row (the statement's snapshot shows only rows that existed
/// before it: a key inserted concurrently returns nothing and is looked up again). A key twice
/// in a batch gets one row. A call of `jobkit_remote_insert_rows` (schema version 10), which
/// finds a key's earlier row by one probe of the (queue, key) index at any table size.
struct InsertRowsStatement: PostgresPreparedStatement {
  struct Row: Sendable {
    let id: Int64
    let key: String
    let generation: Int32
    /// Inserted by this statement (otherwise the key's row existed before it).
    let isNew: Bool
    let row: RemoteRow
  }

  static let name = "jobkit_remote_insert_rows_6"

  static let sql = """
    SELECT row_id, row_key, row_generation, row_is_new, row_state, row_output, row_message, row_attempt, row_code
    FROM jobkit_remote_insert_rows($1, $2, $3, $4, $5, $6, $7, $8)
    """

  let queue: String
  let kinds: [String]
  let keys: [String]
  let inputs: [Data]
  /// Per row, the earliest start in seconds since 1970 (0: now).
  let runAfter: [Double]
  let maxAttempts: Int32
  /// `""`: none.
  var concurrencyKeys: [String] = []
  /// Each row's parent row (0: none).
  var parents: [Int64] = []

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 8)
    bindings.append(queue)
    bindings.append(kinds)
    bindings.append(keys)
    bindings.append(inputs.map { ByteBuffer(bytes: $0) })
    bindings.append(maxAttempts)
    bindings.append(runAfter)
    bindings.append(concurrencyKeys.count == keys.count ? concurrencyKeys : keys.map { _ in "" })
    bindings.append(parents.count == keys.count ? parents : keys.map { _ in 0 })
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let (id, key, generation, isNew, state, output, message, attempt, code) = try row.decode(
      (Int64, String, Int32, Bool, String, Data?, String?, Int32, String?).self)
    return Row(
      id: id, key: key, generation: generation, isNew: isNew,
      row: RemoteRow(state: state, output: output, message: message, attempt: Int(attempt), code: code))
  }
}
