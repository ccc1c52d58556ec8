import Foundation
@_spi(JobScope) import JobKit

/// The row whose handler runs: every ``RemoteWork`` made while it runs, in the job the handler
/// runs at any depth, becomes its child (the child's row records `parent_id`, its key is scoped
/// by the parent's key). Bound by the worker around each handler run, as a task-local that the
/// jobs made in the handler take and hand down to what they track (`JobScope`).
///
/// It also tells the worker when the handler waits for its children, so that a waiting parent
/// does not hold the slot a child needs (see ``RemoteWorker``), and the jobs the handler makes
/// how long ago the row's first attempt started (``timeAlreadyUsed``): their time limits count
/// from then. The jobs they track get a twin that used none (``handedDown``).
final class DurableScope: JobScope, @unchecked Sendable {
  // @unchecked Sendable: the counter lives in a locked box (shared with the twin); the rest is
  // immutable.

  /// The parent's row id.
  let rowID: Int64
  /// The parent's key: a child's stored key is this, the separator, then its own key.
  let key: String
  /// How long ago the row's first attempt started (zero on the first attempt).
  let timeAlreadyUsed: Duration
  /// Told `true` when the handler starts waiting for a child with no other wait going on,
  /// `false` when its last wait ended.
  private let onWaiting: @Sendable (Bool) -> Void
  private let state: Locked<LeaseState>
  /// The same row's scope with no time used: what the handler's jobs hand down.
  private let twin: DurableScope?

  /// Separates a parent's key from its child's key in the child's stored key: a child key
  /// that contains it is refused (``RemoteQueueError/Code/invalidKey``), so that two scoped keys
  /// never collide.
  static let separator: Character = "\u{1F}"

  convenience init(
    rowID: Int64, key: String, timeAlreadyUsed: Duration = .zero, onWaiting: @escaping @Sendable (Bool) -> Void
  ) {
    let state = Locked(LeaseState())
    let twin =
      timeAlreadyUsed > .zero
      ? DurableScope(rowID: rowID, key: key, timeAlreadyUsed: .zero, onWaiting: onWaiting, state: state, twin: nil)
      : nil
    self.init(
      rowID: rowID, key: key, timeAlreadyUsed: timeAlreadyUsed, onWaiting: onWaiting, state: state, twin: twin)
  }

  private init(
    rowID: Int64, key: String, timeAlreadyUsed: Duration, onWaiting: @escaping @Sendable (Bool) -> Void,
    state: Locked<LeaseState>, twin: DurableScope?
  ) {
    self.rowID = rowID
    self.key = key
    self.timeAlreadyUsed = timeAlreadyUsed
    self.onWaiting = onWaiting
    self.state = state
    self.twin = twin
  }

  /// What a job made in the handler hands down: the same row, the same waits, no time used
  /// (a nested job's time limit counts from its own start).
  var handedDown: any JobScope {
    twin ?? self
  }

  /// The stored key of a child whose own key is `local`.
  func scopedKey(_ local: String) throws -> String {
    if local.contains(Self.separator) {
      throw RemoteQueueError(
        .invalidKey,
        message: "the idempotency key '\(local.prefix(40))' of a durable job's child contains U+001F, "
          + "the separator of scoped keys")
    }
    return key + String(Self.separator) + local
  }

  /// Runs `body`, a wait for a child's row, counted as a wait of the handler.
  func waiting<Result>(_ body: () async throws -> Result) async rethrows -> Result {
    let first = state.withLock { state -> Bool in
      state.waits += 1
      return state.waits == 1
    }
    if first { onWaiting(true) }
    defer {
      let last = state.withLock { state -> Bool in
        state.waits -= 1
        return state.waits == 0
      }
      if last { onWaiting(false) }
    }
    return try await body()
  }

  /// The worker gave the row up while its handler ran (its lease was lost, or it was handed
  /// back at shutdown): the row runs again elsewhere, and its new run attaches to the children.
  /// The cancel of this run's handler then leaves the children's rows alone.
  func abandon() {
    state.withLock { $0.abandoned = true }
  }

  /// Whether the worker gave the row up (``abandon()``).
  var isAbandoned: Bool {
    state.withLock { $0.abandoned }
  }

  /// The worker holds the row's lease until `instant` at least (a claim or a heartbeat sent
  /// before it, less a margin).
  func leaseHeld(until instant: ContinuousClock.Instant) {
    state.withLock { state in
      state.leaseHeldUntil = max(state.leaseHeldUntil ?? instant, instant)
    }
  }

  /// Whether the row's lease is surely this run's at `now`: not abandoned, and renewed recently
  /// enough. A process that was stopped (or stalled) past its lease is not, until a heartbeat
  /// renewed it (or found it lost: ``abandon()``).
  func holdsLease(at now: ContinuousClock.Instant) -> Bool {
    state.withLock { state in
      !state.abandoned && state.leaseHeldUntil.map { now < $0 } ?? true
    }
  }

  /// Waits until ``holdsLease(at:)`` (polled every `interval`), or throws `CancellationError`
  /// once the row was given up.
  func waitForLease(polling interval: Duration = .milliseconds(50)) async throws {
    let clock = ContinuousClock()
    while !holdsLease(at: clock.now) {
      if isAbandoned { throw CancellationError() }
      try await Task.sleep(for: interval)
    }
  }

  /// The scope of the code running now: bound by a worker's handler run, or handed down to the
  /// job this code runs in.
  static var current: DurableScope? {
    JobController.currentScope as? DurableScope
  }
}

/// A durable scope's state, shared with its twin.
struct LeaseState {
  /// Waits for children going on.
  var waits = 0
  /// The worker gave the row up.
  var abandoned = false
  /// Until when the lease is surely held; `nil`: not known (always held).
  var leaseHeldUntil: ContinuousClock.Instant?
}

extension Locked where Value == DurableScope? {
  /// Keeps `scope` if it is a durable job's and none is held yet: what a ``RemoteWork`` or a
  /// ``DurableStep`` tracked by a job takes from it (a scope bound at the task's creation wins).
  func adopt(_ scope: any JobScope) {
    guard let durable = scope as? DurableScope else { return }
    withLockedValue { current in
      if current == nil { current = durable }
    }
  }
}
