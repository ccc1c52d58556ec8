import Foundation
import JobKit

/// A task that runs on a ``RemoteWorker`` through a ``RemoteQueue``: a `Work` whose result is
/// the remote handler's output.
///
/// ```swift
/// trackAndQueue(resultOf: RemoteWork<HashFile>(path, queue: queue, idempotencyKey: path)) { result in
///     if case .success(let digest) = result { record(path, digest) }
/// }
/// ```
///
/// - **Start** inserts the task's row (kind, JSON input, key). A key that already has a row in
///   the queue attaches to it instead: a finished row's stored outcome comes back without running
///   again, so a job re-run after its process died skips what already completed. A key names
///   the work, not only where its input lives: a path whose file may change is no key (add its
///   size and modification time, or a run id). Keys are unique per queue; reuse one only for
///   the same task. A key that is empty, holds a NUL character or is longer than
///   ``RemoteQueue/maxKeyBytes`` fails the task with ``RemoteQueueError/Code/invalidKey``.
/// - **Re-run**: a new request. A cancelled row is armed again and runs; a failed row gives its
///   stored failure (arm it again with ``RemoteQueue/retryFailed(idempotencyKeys:)``). A cancel
///   from an earlier run of the key, still going, does not cancel the new run.
/// - **Finish**: when the row is final (a `NOTIFY` on the queue's channel, or the poll
///   fallback): `.success(output)` for a completed row, `.failure(RemoteTaskError)` with the
///   stored message and attempt for a failed one; a cancelled row finishes the task cancelled.
///   A database that is unreachable for a while delays the finish; one unreachable for longer
///   than ``RemoteQueue/Configuration/reconnectTimeout`` fails the task with
///   ``RemoteQueueError`` (its row stays: a re-run with the same key attaches to it). A row
///   deleted while its task waits fails the task with ``RemoteQueueError/Code/taskVanished``.
/// - **Cancel** (`cancel()`, or the job's cancel): the row is marked; an unclaimed row is
///   cancelled at once and no worker starts it after; a running handler is cancelled at its
///   worker's next heartbeat. The task finishes cancelled right away.
/// - As any `Work`: per-type limits (each `Kind` is a group of its own), `RetryPolicy`,
///   timeouts, events and `JobTimeline` apply unchanged. A JobKit retry that builds a new
///   `RemoteWork` with the **same** key attaches to the failed row and gets its failure again;
///   give each attempt its own key, or rely on the worker's retries (``RemoteQueue/Configuration/maxAttempts``).
open class RemoteWork<Kind: RemoteTaskKind>: Work<Kind.Output>, @unchecked Sendable {
  // @unchecked Sendable: the stored properties are immutable; the row id and the concurrency key
  // live in locked boxes.

  /// The input sent to the worker.
  public let input: Kind.Input
  /// The queue the task is added to.
  public let queue: RemoteQueue
  /// The task's key, unique in its queue.
  public let idempotencyKey: String
  private let rowID: Locked<Int64?>
  /// Set once, by the initializer that takes it, before the task can start.
  private let concurrencyKeyBox: Locked<String?>

  /// A task that runs `Kind`'s handler on `input` on a worker of `queue`.
  public init(_ input: Kind.Input, queue: RemoteQueue, idempotencyKey: String) {
    self.input = input
    self.queue = queue
    self.idempotencyKey = idempotencyKey
    let rowID = Locked<Int64?>(nil)
    self.rowID = rowID
    let concurrencyKey = Locked<String?>(nil)
    self.concurrencyKeyBox = concurrencyKey
    let remote = RemoteCall<Kind>(
      input: input, queue: queue, key: idempotencyKey, concurrencyKey: concurrencyKey, rowID: rowID)
    super.init(async: { try await remote.execute() })
  }

  /// A task that runs `Kind`'s handler on `input` on a worker of `queue`, counted under
  /// `concurrencyKey` by the kind's ``RemoteQueue/Limits/maxRunningPerConcurrencyKey``. A row
  /// its key had already keeps the concurrency key it was inserted with.
  public convenience init(_ input: Kind.Input, queue: RemoteQueue, idempotencyKey: String, concurrencyKey: String?) {
    self.init(input, queue: queue, idempotencyKey: idempotencyKey)
    concurrencyKeyBox.withLock { $0 = concurrencyKey }
  }

  /// The key the queue's limit per concurrency key counts the task under (a tenant, a domain;
  /// see ``RemoteQueue/Limits``), stored in its row at insertion; `nil` or empty: none.
  public var concurrencyKey: String? {
    concurrencyKeyBox.withLock { $0 }
  }

  /// The id of the task's row once its start inserted or found it, else `nil`.
  public var taskID: Int64? {
    rowID.withLock { $0 }
  }
}

/// The body of a ``RemoteWork``: insert or attach, then wait for the final row.
struct RemoteCall<Kind: RemoteTaskKind>: Sendable {
  let input: Kind.Input
  let queue: RemoteQueue
  let key: String
  let concurrencyKey: Locked<String?>
  let rowID: Locked<Int64?>
  let kind = Kind.name

  func execute() async throws -> Kind.Output {
    try queue.validate(key: key)
    let payload = try JSONEncoder().encode(input)
    let inserted: (id: Int64, generation: Int32, final: RemoteRow?)
    do {
      inserted = try await queue.retryingWhileUnreachable {
        try await queue.insert(kind: kind, key: key, input: payload, concurrencyKey: concurrencyKey.withLock { $0 })
      }
    } catch {
      if Task.isCancelled { await cancelRow(generation: nil) }
      throw error
    }
    rowID.withLock { $0 = inserted.id }
    let row: RemoteRow
    if let final = inserted.final {
      row = final
    } else {
      do {
        try Task.checkCancellation()
        row = try await queue.router.wait(for: inserted.id, queue: queue)
      } catch let error as RemoteQueueError {
        // The database stayed unreachable: the row cannot be marked, and stays for a re-run.
        throw error
      } catch {
        await cancelRow(generation: inserted.generation)
        throw error
      }
    }
    return try row.result(Kind.Output.self).get()
  }

  /// Asks the queue's result router to mark the row cancelled: the caller's task is cancelled,
  /// and a query from it could be refused. The router sends it from the queue's ``RemoteQueue/run()``
  /// (or from a task of the queue that polls for its result). Fenced by `generation`: a re-run
  /// that armed the row again since is not cancelled.
  private func cancelRow(generation: Int32?) async {
    queue.router.requestCancel(key: key, generation: generation)
  }
}
