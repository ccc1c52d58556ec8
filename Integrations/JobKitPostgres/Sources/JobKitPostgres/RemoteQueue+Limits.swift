import Foundation
import Logging
import PostgresNIO

/// Limits across workers: at most so many running tasks of a kind over every worker of the
/// queue, and at most so many per concurrency key, kept in `jobkit_remote_limits`.
extension RemoteQueue {
  /// How many tasks of one kind may run at once over all the queue's workers together, set with
  /// ``RemoteQueue/setLimits(_:forKind:)``: persisted, changeable while workers run, enforced by
  /// the workers' claim statement (two workers claiming at once never exceed it). It holds next
  /// to each worker's own limit (`register(_:maxConcurrent:)`): a task runs when both allow it.
  ///
  /// ``maxRunningPerConcurrencyKey`` limits the running tasks of the kind that share a
  /// concurrency key (a tenant, a domain: `RemoteWork(_:queue:idempotencyKey:concurrencyKey:)`);
  /// tasks without a key are held by ``maxRunning`` only. A limit lowered below what runs stops
  /// claims until enough tasks ended; running tasks are not stopped. A limit of 0 holds the
  /// kind's tasks until it is raised. Rows of full kinds and keys are passed over, so other
  /// tasks of the queue run meanwhile.
  public struct Limits: Sendable, Equatable, Hashable {
    /// The most running tasks of the kind over all workers; `nil`: no limit.
    public var maxRunning: Int?
    /// The most running tasks of the kind with the same concurrency key; `nil`: no limit.
    public var maxRunningPerConcurrencyKey: Int?

    /// Limits of a kind; `nil` leaves that side unlimited (both `nil`: no limit at all).
    public init(maxRunning: Int? = nil, maxRunningPerConcurrencyKey: Int? = nil) {
      self.maxRunning = maxRunning
      self.maxRunningPerConcurrencyKey = maxRunningPerConcurrencyKey
    }

    /// Throws ``RemoteQueueError/Code/invalidConfiguration`` naming each negative value.
    func validate() throws {
      var problems: [String] = []
      if let value = maxRunning, value < 0 { problems.append("maxRunning \(value) is negative") }
      if let value = maxRunningPerConcurrencyKey, value < 0 {
        problems.append("maxRunningPerConcurrencyKey \(value) is negative")
      }
      guard problems.isEmpty else {
        throw RemoteQueueError(
          .invalidConfiguration, message: "RemoteQueue.Limits: " + problems.joined(separator: "; "))
      }
    }
  }

  /// Sets the limits of `kind` in this queue for every worker (the next claims apply them) and
  /// wakes the workers; `Limits()` removes them. Throws
  /// ``RemoteQueueError/Code/invalidConfiguration`` for a negative limit.
  public func setLimits(_ limits: Limits, forKind kind: String) async throws {
    try limits.validate()
    let maxRunning = limits.maxRunning.map { Int32(clamping: $0) }
    let perKey = limits.maxRunningPerConcurrencyKey.map { Int32(clamping: $0) }
    try await statement(
      """
      WITH removed AS (
        DELETE FROM jobkit_remote_limits
        WHERE queue = \(name) AND kind = \(kind) AND \(maxRunning)::integer IS NULL AND \(perKey)::integer IS NULL
      ), stored AS (
        INSERT INTO jobkit_remote_limits AS l (queue, kind, max_running, max_running_per_key)
        SELECT \(name), \(kind), \(maxRunning)::integer, \(perKey)::integer
        WHERE \(maxRunning)::integer IS NOT NULL OR \(perKey)::integer IS NOT NULL
        ON CONFLICT (queue, kind) DO UPDATE
          SET max_running = excluded.max_running, max_running_per_key = excluded.max_running_per_key
      )
      SELECT pg_notify('jk_' || md5(\(name)) || '_new', '')
      """
    ) { rows in
      for try await _ in rows {}
    }
    logger.info(
      "limits set",
      metadata: [
        "queue": "\(name)", "kind": "\(kind)", "max-running": "\(limits.maxRunning.map(String.init) ?? "none")",
        "max-running-per-key": "\(limits.maxRunningPerConcurrencyKey.map(String.init) ?? "none")",
      ])
  }

  /// Sets the limits of `Kind` in this queue (see ``setLimits(_:forKind:)``).
  public func setLimits<Kind: RemoteTaskKind>(_ limits: Limits, for kind: Kind.Type) async throws {
    try await setLimits(limits, forKind: Kind.name)
  }

  /// The limits of every kind of this queue that has some, by kind name.
  public func limits() async throws -> [String: Limits] {
    try await statement(
      "SELECT kind, max_running, max_running_per_key FROM jobkit_remote_limits WHERE queue = \(name)"
    ) { rows in
      var limits: [String: Limits] = [:]
      for try await (kind, maxRunning, perKey) in rows.decode((String, Int32?, Int32?).self) {
        limits[kind] = Limits(maxRunning: maxRunning.map(Int.init), maxRunningPerConcurrencyKey: perKey.map(Int.init))
      }
      return limits
    }
  }
}
