import Foundation
@_spi(JobScope) import JobKit

/// Local work of a durable job that must not run again after a recovery (a charge, an email):
/// its `Codable` result is stored as a child row of the job, and a re-run of the job gets it
/// back without running the body.
///
/// ```swift
/// trackAndQueue(resultOf: DurableStep(queue: queue, idempotencyKey: "charge") {
///     try await payments.charge(order)           // runs once per job, whatever recovers it
/// }) { result in … }
/// ```
///
/// - **Start** looks up the step's row (its key scoped as ``RemoteWork``'s, by ``RemoteKeyScope``):
///   a stored result comes back at once. Otherwise the body runs here, in this process, and its
///   result is stored (a completed row of kind `jobkit.step`, never claimed by a worker). If
///   another run stored one first, that one is the result: each step has one accepted result.
/// - **Once the row exists** the body never runs again for the key. A process that dies after
///   the body and before the row was stored runs it again on the recovery: make the body
///   idempotent where it can be (pass the key to the service it calls). A run stopped past its
///   lease starts no body until a heartbeat renewed it: another run may have taken the job.
/// - A body that throws stores nothing: the re-run tries it again. Stored rows are kept and
///   pruned as completed rows are (``RemoteQueue/Configuration/retention``).
open class DurableStep<Output: Codable & Sendable>: Work<Output>, @unchecked Sendable {
  // @unchecked Sendable: the stored properties are immutable; the scope lives in a locked box.

  /// The queue whose table stores the step's result.
  public let queue: RemoteQueue
  /// The step's key, unique among its job's children (or in the queue, see ``keyScope``).
  public let idempotencyKey: String
  /// Where ``idempotencyKey`` is unique.
  public let keyScope: RemoteKeyScope
  let scope: Locked<DurableScope?>

  /// A step whose result `body` computes once, stored in `queue`'s table under `idempotencyKey`.
  public init(
    queue: RemoteQueue, idempotencyKey: String, keyScope: RemoteKeyScope = .job,
    _ body: @escaping @Sendable () async throws -> Output
  ) {
    self.queue = queue
    self.idempotencyKey = idempotencyKey
    self.keyScope = keyScope
    let scope = Locked(DurableScope.current)
    self.scope = scope
    super.init(async: {
      let durable = keyScope.isQueue ? nil : scope.withLock { $0 }
      let key = try durable?.scopedKey(idempotencyKey) ?? idempotencyKey
      try queue.validate(key: key)
      while true {
        if let stored = try await queue.retryingWhileUnreachable({ try await queue.storedStep(key: key) }) {
          return try JSONDecoder().decode(Output.self, from: stored)
        }
        // A run stopped past its lease (another may have taken the job and stored the step
        // since the look-up) starts no body until a heartbeat says the row is still its own.
        guard let durable, !durable.holdsLease(at: .now) else { break }
        try await durable.waitForLease()
      }
      let output = try await body()
      let encoded = try JSONEncoder().encode(output)
      let kept = try await queue.retryingWhileUnreachable {
        try await queue.storeStep(key: key, output: encoded, parentID: durable?.rowID)
      }
      return try JSONDecoder().decode(Output.self, from: kept)
    })
  }
}

@_spi(JobScope)
extension DurableStep: JobScopeInheriting {
  /// Takes the durable scope of the job that tracks the step (unless it has one already).
  public func inheritScope(_ scope: any JobScope) {
    self.scope.adopt(scope)
  }
}

extension RemoteQueue {
  /// The kind of a ``DurableStep``'s row.
  static let stepKind = "jobkit.step"

  /// The stored output of the step with key `key`, if its row completed.
  func storedStep(key: String) async throws -> Data? {
    try await statement(
      """
      SELECT output FROM jobkit_remote_tasks
      WHERE queue = \(name) AND idempotency_key = \(key) AND state = 'completed'
      """
    ) { rows in
      for try await output in rows.decode(Data?.self) { return output }
      return nil
    }
  }

  /// Stores `output` as the step's completed row, unless the key has a row already; returns the
  /// output the row holds (this one, or the one stored first).
  func storeStep(key: String, output: Data, parentID: Int64?) async throws -> Data {
    try await statement(
      """
      WITH inserted AS (
        INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, state, attempt, max_attempts,
          output, finished_at, parent_id, first_started_at)
        VALUES (\(name), \(Self.stepKind), \(key), ''::bytea, 'completed', 1, 1, \(output), now(), \(parentID), now())
        ON CONFLICT (queue, idempotency_key) DO NOTHING
        RETURNING output
      )
      SELECT output FROM inserted
      UNION ALL
      SELECT output FROM jobkit_remote_tasks
      WHERE queue = \(name) AND idempotency_key = \(key) AND NOT EXISTS (SELECT 1 FROM inserted)
      """
    ) { rows in
      for try await stored in rows.decode(Data?.self) {
        guard let stored else { break }
        return stored
      }
      throw RemoteQueueError(
        .taskVanished, message: "the row of step '\(key)' has no stored result (a task of another kind has its key)")
    }
  }
}
