import Foundation
@_spi(JobScope) import JobKit

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
/// - **In a durable job** (made while a ``RemoteWorker``'s handler runs, in the job it runs at
///   any depth): the task is the handler's row's child, its key scoped by the parent's key
///   (``RemoteKeyScope/job``), unless made with ``RemoteKeyScope/queue``. See <doc:RunningTasksOnOtherMachines>.
open class RemoteWork<Kind: RemoteTaskKind>: Work<Kind.Output>, @unchecked Sendable {
  // @unchecked Sendable: the stored properties are immutable; the row id, the concurrency key
  // and the durable scope live in locked boxes.

  /// Where a task's key is unique (``RemoteKeyScope``).
  public typealias KeyScope = RemoteKeyScope

  /// The input sent to the worker.
  public let input: Kind.Input
  /// The queue the task is added to.
  public let queue: RemoteQueue
  /// The task's key, unique in its queue.
  public let idempotencyKey: String
  /// Where ``idempotencyKey`` is unique.
  public var keyScope: KeyScope {
    keyScopeBox.withLock { $0 }
  }
  private let keyScopeBox: Locked<KeyScope>
  private let rowID: Locked<Int64?>
  /// Set once, by the initializer that takes it, before the task can start.
  private let concurrencyKeyBox: Locked<String?>
  let scope: Locked<DurableScope?>

  /// A task that runs `Kind`'s handler on `input` on a worker of `queue`; its key is scoped
  /// as ``RemoteKeyScope/job`` says.
  public init(_ input: Kind.Input, queue: RemoteQueue, idempotencyKey: String) {
    self.input = input
    self.queue = queue
    self.idempotencyKey = idempotencyKey
    let keyScope = Locked(KeyScope.job)
    self.keyScopeBox = keyScope
    let rowID = Locked<Int64?>(nil)
    self.rowID = rowID
    let concurrencyKey = Locked<String?>(nil)
    self.concurrencyKeyBox = concurrencyKey
    let scope = Locked(DurableScope.current)
    self.scope = scope
    let remote = RemoteCall<Kind>(
      input: input, queue: queue, key: idempotencyKey, keyScope: keyScope, concurrencyKey: concurrencyKey,
      rowID: rowID, scope: scope)
    super.init(async: { try await remote.execute() })
  }

  /// A task that runs `Kind`'s handler on `input` on a worker of `queue`, its key unique where
  /// `keyScope` says.
  public convenience init(_ input: Kind.Input, queue: RemoteQueue, idempotencyKey: String, keyScope: KeyScope) {
    self.init(input, queue: queue, idempotencyKey: idempotencyKey)
    // Before the task can start: its start reads it.
    keyScopeBox.withLock { $0 = keyScope }
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

@_spi(JobScope)
extension RemoteWork: JobScopeInheriting {
  /// Takes the durable scope of the job that tracks the task (unless it has one already).
  public func inheritScope(_ scope: any JobScope) {
    self.scope.adopt(scope)
  }
}

/// The body of a ``RemoteWork``: insert or attach, then wait for the final row.
struct RemoteCall<Kind: RemoteTaskKind>: Sendable {
  let input: Kind.Input
  let queue: RemoteQueue
  /// The key the task was given.
  let local: String
  let keyScope: Locked<RemoteKeyScope>
  let concurrencyKey: Locked<String?>
  let rowID: Locked<Int64?>
  let scope: Locked<DurableScope?>
  let kind = Kind.name

  init(
    input: Kind.Input, queue: RemoteQueue, key: String, keyScope: Locked<RemoteKeyScope>,
    concurrencyKey: Locked<String?>, rowID: Locked<Int64?>, scope: Locked<DurableScope?>
  ) {
    self.input = input
    self.queue = queue
    self.local = key
    self.keyScope = keyScope
    self.concurrencyKey = concurrencyKey
    self.rowID = rowID
    self.scope = scope
  }

  func execute() async throws -> Kind.Output {
    let durable = scope.withLock { $0 }
    let parent = keyScope.withLock { $0 }.isQueue ? nil : durable
    let key = try parent?.scopedKey(local) ?? local
    try queue.validate(key: key)
    let payload = try JSONEncoder().encode(input)
    let inserted: (id: Int64, generation: Int32, final: RemoteRow?)
    do {
      inserted = try await queue.retryingWhileUnreachable {
        try await queue.insert(
          kind: kind, key: key, input: payload, concurrencyKey: concurrencyKey.withLock { $0 },
          parentID: parent?.rowID ?? 0)
      }
    } catch {
      // No start was sent, or its answer was lost: the row may exist, of any generation. A
      // durable job's child is left alone: another run of the job may have attached to it, and
      // this job's finish cancels it if nobody asked for it.
      if Task.isCancelled, parent == nil { await cancelRow(key: key, generation: nil) }
      throw error
    }
    rowID.withLock { $0 = inserted.id }
    let row: RemoteRow
    if let final = inserted.final {
      row = final
    } else {
      do {
        try Task.checkCancellation()
        if let durable {
          // The handler waiting here holds no slot of its worker meanwhile.
          row = try await durable.waiting { try await queue.router.wait(for: inserted.id, queue: queue) }
        } else {
          row = try await queue.router.wait(for: inserted.id, queue: queue)
        }
      } catch let error as RemoteQueueError {
        // The database stayed unreachable: the row cannot be marked, and stays for a re-run.
        throw error
      } catch {
        // A job whose row its worker gave up runs again elsewhere, attached to this child.
        if durable?.isAbandoned != true {
          await cancelRow(key: key, generation: inserted.generation)
        }
        throw error
      }
    }
    return try row.result(Kind.Output.self).get()
  }

  /// Asks the queue's result router to mark the row cancelled: the caller's task is cancelled,
  /// and a query from it could be refused. The router sends it from the queue's ``RemoteQueue/run()``
  /// (or from a task of the queue that polls for its result). Fenced by `generation`: a re-run
  /// that armed the row again since is not cancelled.
  private func cancelRow(key: String, generation: Int32?) async {
    queue.router.requestCancel(key: key, generation: generation)
  }
}

/// Where a ``RemoteWork``'s key is unique: among the children of the durable job whose handler
/// made it (``job``, the default), or in the whole queue (``queue``).
public struct RemoteKeyScope: Sendable, Hashable {
  private let sharedByQueue: Bool

  /// Made while a ``RemoteWorker``'s handler runs (in the job it runs, at any depth), the task
  /// is a child of the handler's row, and its key is unique among that row's children: two
  /// durable jobs may use the same key. Made elsewhere, the key is the queue's.
  public static let job = RemoteKeyScope(sharedByQueue: false)
  /// The key is unique in the whole queue, wherever the task is made: every job that uses it
  /// attaches to one row, which is nobody's child (a durable job's finish or cancel leaves it
  /// alone).
  public static let queue = RemoteKeyScope(sharedByQueue: true)

  var isQueue: Bool { sharedByQueue }
}
