import Foundation
import Logging
import PostgresNIO

/// Starting and awaiting remote tasks from anywhere, not only from a job: ``RemoteTaskHandle``s.
/// Every form inserts with the statement ``RemoteWork`` uses (`RemoteQueue+Insert.swift`), so
/// a key means the same everywhere: a key that has a row already attaches to it.
extension RemoteQueue {
  /// Inserts a task of `Kind` on `input` under `idempotencyKey` and returns its handle as soon
  /// as the row is stored, without waiting for a worker.
  ///
  /// A key that already has a row in the queue gives that row's handle (a cancelled row is armed
  /// again, as a re-run of a ``RemoteWork`` does); a key names one task. With `runAt`, no worker
  /// starts the task before that time. Starts that arrive together (from many callers) share one
  /// statement. Throws ``RemoteQueueError/Code/invalidKey`` for a key the table cannot store,
  /// ``RemoteQueueError/Code/invalidInput`` for an input that does not encode, and
  /// ``RemoteQueueError/Code/databaseUnreachable`` after
  /// ``Configuration/reconnectTimeout`` without the database.
  public func enqueue<Kind: RemoteTaskKind>(
    _ kind: Kind.Type, _ input: Kind.Input, idempotencyKey: String, runAt: Date? = nil
  ) async throws -> RemoteTaskHandle<Kind> {
    let row = try newRow(RemoteTaskRequest<Kind>(input, idempotencyKey: idempotencyKey, runAt: runAt))
    let inserted = try await retryingWhileUnreachable {
      try await self.insert(kind: row.kind, key: row.key, input: row.input, runAfter: row.runAfter)
    }
    return RemoteTaskHandle(
      id: inserted.id, idempotencyKey: idempotencyKey, queue: self, generation: inserted.generation)
  }

  /// Inserts many tasks of `Kind` with few statements (one per 1,000 rows, at most 8 MB of input
  /// each) and returns their handles, in the order of `requests`.
  ///
  /// Every key and input is checked before anything is inserted (the errors of
  /// ``enqueue(_:_:idempotencyKey:runAt:)``). Keys behave as there; a key twice in `requests`
  /// gives one row. If a statement fails, the rows of the statements before it stay: calling
  /// again with the same requests attaches to them.
  public func enqueue<Kind: RemoteTaskKind>(
    _ kind: Kind.Type, contentsOf requests: [RemoteTaskRequest<Kind>]
  ) async throws -> [RemoteTaskHandle<Kind>] {
    var handles: [RemoteTaskHandle<Kind>] = []
    handles.reserveCapacity(requests.count)
    for chunk in try chunks(requests) {
      // Each statement gets the whole reconnect timeout, as a single start does.
      let deadline = ContinuousClock.now + configuration.reconnectTimeout
      let rows = chunk.map { row -> RemoteNewRow in
        var row = row
        row.deadline = deadline
        return row
      }
      for (row, outcome) in zip(rows, try await insertBatch(rows)) {
        let inserted = try outcome.get()
        handles.append(
          RemoteTaskHandle(id: inserted.id, idempotencyKey: row.key, queue: self, generation: inserted.generation))
      }
    }
    return handles
  }

  /// Inserts a task on `connection`, in the transaction the caller has open on it, and returns
  /// its handle: the row exists only if that transaction commits, no worker sees it before, and
  /// the workers' notification goes out with the commit.
  ///
  /// The statements run on `connection` without retries or time limit (the transaction is the
  /// caller's). Call ``RemoteTaskHandle/result()`` after the commit: before it, or after a
  /// rollback, the row is not there and the wait throws ``RemoteQueueError/Code/taskVanished``.
  /// Keys, `runAt` and validation as in ``enqueue(_:_:idempotencyKey:runAt:)``.
  ///
  /// ```swift
  /// try await client.withTransaction(logger: logger) { connection in
  ///     try await connection.query("INSERT INTO orders (id) VALUES (\(orderID))", logger: logger)
  ///     _ = try await queue.enqueue(ShipOrder.self, orderID, idempotencyKey: "ship:\(orderID)", on: connection)
  /// }
  /// ```
  public func enqueue<Kind: RemoteTaskKind>(
    _ kind: Kind.Type, _ input: Kind.Input, idempotencyKey: String, runAt: Date? = nil,
    on connection: PostgresConnection
  ) async throws -> RemoteTaskHandle<Kind> {
    let handles = try await enqueue(
      kind, contentsOf: [RemoteTaskRequest(input, idempotencyKey: idempotencyKey, runAt: runAt)], on: connection)
    guard let handle = handles.first else {
      throw RemoteQueueError(.taskVanished, message: "the insert returned no row for key '\(idempotencyKey)'")
    }
    return handle
  }

  /// The batch form of ``enqueue(_:_:idempotencyKey:runAt:on:)``: every row inserted on
  /// `connection`, in the caller's transaction, with few statements.
  public func enqueue<Kind: RemoteTaskKind>(
    _ kind: Kind.Type, contentsOf requests: [RemoteTaskRequest<Kind>], on connection: PostgresConnection
  ) async throws -> [RemoteTaskHandle<Kind>] {
    var handles: [RemoteTaskHandle<Kind>] = []
    handles.reserveCapacity(requests.count)
    for chunk in try chunks(requests) {
      let found = try await insertRows(chunk, on: connection)
      for row in chunk {
        guard let inserted = found[row.key] else {
          throw RemoteQueueError(.taskVanished, message: "the insert returned no row for key '\(row.key)'")
        }
        handles.append(
          RemoteTaskHandle(id: inserted.id, idempotencyKey: row.key, queue: self, generation: inserted.generation))
      }
    }
    return handles
  }

  /// The handle of the task with `idempotencyKey` in this queue, inserted by any process.
  ///
  /// Throws ``RemoteQueueError/Code/taskNotFound`` when the queue has no row with the key (never
  /// inserted, deleted by retention, or inserted in a transaction not committed yet),
  /// ``RemoteQueueError/Code/kindMismatch`` when the row is of another kind than `Kind`, and
  /// ``RemoteQueueError/Code/invalidKey`` for a key the table cannot store.
  public func handle<Kind: RemoteTaskKind>(
    for kind: Kind.Type, idempotencyKey: String
  ) async throws -> RemoteTaskHandle<Kind> {
    try validate(key: idempotencyKey)
    let name = name
    let found = try await retryingWhileUnreachable {
      try await self.statement(
        "SELECT id, kind, generation FROM jobkit_remote_tasks WHERE queue = \(name) AND idempotency_key = \(idempotencyKey)"
      ) { rows in
        var found: (id: Int64, kind: String, generation: Int32)?
        for try await (id, kind, generation) in rows.decode((Int64, String, Int32).self) {
          found = (id, kind, generation)
        }
        return found
      }
    }
    guard let found else {
      throw RemoteQueueError(
        .taskNotFound, message: "queue '\(name)' has no task with key '\(idempotencyKey.prefix(200))'")
    }
    guard found.kind == Kind.name else {
      throw RemoteQueueError(
        .kindMismatch,
        message: "the task with key '\(idempotencyKey.prefix(200))' is of kind '\(found.kind)', not '\(Kind.name)'")
    }
    return RemoteTaskHandle(id: found.id, idempotencyKey: idempotencyKey, queue: self, generation: found.generation)
  }

  /// Runs `query` on `connection` if given (no time limit: the caller's transaction), else as
  /// ``statement(_:read:)`` does.
  func statement<Result: Sendable>(
    on connection: PostgresConnection?, _ query: PostgresQuery,
    read: @escaping @Sendable (PostgresRowSequence) async throws -> Result
  ) async throws -> Result {
    guard let connection else { return try await statement(query, read: read) }
    return try await read(try await connection.query(query, logger: logger))
  }

  /// The row of `request`, checked: a key the table can store, an input that encodes, a finite
  /// `runAt`.
  private func newRow<Kind: RemoteTaskKind>(_ request: RemoteTaskRequest<Kind>) throws -> RemoteNewRow {
    try validate(key: request.idempotencyKey)
    if let runAt = request.runAt, !runAt.timeIntervalSince1970.isFinite {
      throw RemoteQueueError(
        .invalidInput, message: "runAt of key '\(request.idempotencyKey.prefix(200))' is not a finite time")
    }
    let input: Data
    do {
      input = try JSONEncoder().encode(request.input)
    } catch {
      throw RemoteQueueError(
        .invalidInput,
        message: "the input of key '\(request.idempotencyKey.prefix(200))' does not encode as JSON: \(error)")
    }
    return RemoteNewRow(kind: Kind.name, key: request.idempotencyKey, input: input, runAfter: request.runAt)
  }

  /// `requests` checked, as rows in statements of at most ``insertBatchRows`` rows and
  /// ``insertBatchBytes`` bytes of input (a larger row alone).
  private func chunks<Kind: RemoteTaskKind>(_ requests: [RemoteTaskRequest<Kind>]) throws -> [[RemoteNewRow]] {
    var chunks: [[RemoteNewRow]] = []
    var current: [RemoteNewRow] = []
    var bytes = 0
    for request in requests {
      let row = try newRow(request)
      if !current.isEmpty
        && (current.count >= Self.insertBatchRows || bytes + row.input.count > Self.insertBatchBytes)
      {
        chunks.append(current)
        current = []
        bytes = 0
      }
      current.append(row)
      bytes += row.input.count
    }
    if !current.isEmpty { chunks.append(current) }
    return chunks
  }
}

extension RemoteQueueError.Code {
  /// An input that does not encode as JSON, or a `runAt` that is not a finite time
  /// (``RemoteQueue/enqueue(_:_:idempotencyKey:runAt:)`` and its other forms).
  public static let invalidInput = RemoteQueueError.Code(name: "invalidInput")
}
