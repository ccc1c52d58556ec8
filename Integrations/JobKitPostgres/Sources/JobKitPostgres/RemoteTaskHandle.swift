import Foundation

/// A remote task started outside a job (a web request, a script, another service): its row's id
/// and key, its outcome, and its cancel. Made by ``RemoteQueue/enqueue(_:_:idempotencyKey:runAt:)``
/// and its batch and transactional forms, or found by ``RemoteQueue/handle(for:idempotencyKey:)``
/// from any process.
///
/// A handle is a value: copies, and handles of the same row in other processes, see the same
/// outcome. Dropping it changes nothing; the task runs whether or not anybody awaits it.
///
/// ```swift
/// let handle = try await queue.enqueue(HashFile.self, path, idempotencyKey: "hash:\(path)")
/// print(handle.id)                       // at once
/// let digest = try await handle.result() // once a worker ran it
/// ```
public struct RemoteTaskHandle<Kind: RemoteTaskKind>: Sendable {
  /// The row's id in the queue's table.
  public let id: Int64
  /// The task's key, unique in its queue.
  public let idempotencyKey: String
  /// The queue the task is in.
  public let queue: RemoteQueue
  /// The row's generation when the handle was made: a cancel names it, so that it misses a later
  /// re-run of the key.
  let generation: Int32

  /// Waits until the task's row is final and returns the handler's output.
  ///
  /// Throws ``RemoteTaskError`` for a failed row (its stored code, message and attempt),
  /// `CancellationError` for a cancelled row, ``RemoteQueueError/Code/taskVanished`` for a row
  /// deleted (or, from the transactional form, never committed), and
  /// ``RemoteQueueError/Code/databaseUnreachable`` after the queue's
  /// ``RemoteQueue/Configuration/reconnectTimeout`` without the database. Cancelling the calling
  /// task ends the wait with `CancellationError` and leaves the task running (``cancel()``
  /// cancels it). Any number of callers may wait, from any process.
  public func result() async throws -> Kind.Output {
    let row = try await queue.router.wait(for: id, queue: queue)
    return try row.result(Kind.Output.self).get()
  }

  /// Asks for the task's cancellation: a row nobody runs is cancelled at once; a running
  /// handler is cancelled at its worker's next heartbeat; a final row is left as it is. Tried
  /// again while the database cannot be reached, for the queue's
  /// ``RemoteQueue/Configuration/reconnectTimeout``.
  public func cancel() async throws {
    let queue = queue
    let key = idempotencyKey
    let generation = generation
    try await queue.retryingWhileUnreachable {
      try await queue.requestCancel(key: key, generation: generation)
    }
  }
}

/// One task of a batch for ``RemoteQueue/enqueue(_:contentsOf:)``: its input, its key and,
/// if given, the earliest time it may start.
public struct RemoteTaskRequest<Kind: RemoteTaskKind>: Sendable {
  /// What the worker's handler receives.
  public var input: Kind.Input
  /// The task's key, unique in its queue (see ``RemoteWork``).
  public var idempotencyKey: String
  /// No worker starts the task before this time; `nil`: at once.
  public var runAt: Date?

  /// A request to run `Kind`'s handler on `input`, under `idempotencyKey`, no earlier than
  /// `runAt`.
  public init(_ input: Kind.Input, idempotencyKey: String, runAt: Date? = nil) {
    self.input = input
    self.idempotencyKey = idempotencyKey
    self.runAt = runAt
  }
}

extension RemoteQueueError.Code {
  /// ``RemoteQueue/handle(for:idempotencyKey:)`` found no row with the key in the queue.
  public static let taskNotFound = RemoteQueueError.Code(name: "taskNotFound")
  /// ``RemoteQueue/handle(for:idempotencyKey:)`` found the key's row, but of another kind.
  public static let kindMismatch = RemoteQueueError.Code(name: "kindMismatch")
}
