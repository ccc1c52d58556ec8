import Foundation
@_spi(JobScope) import JobKit

/// The row whose handler runs: every ``RemoteWork`` made while it runs, in the job the handler
/// runs at any depth, becomes its child (the child's row records `parent_id`, its key is scoped
/// by the parent's key). Bound by the worker around each handler run, as a task-local that the
/// jobs made in the handler take and hand down to what they track (`JobScope`).
///
/// It also tells the worker when the handler waits for its children, so that a waiting parent
/// does not hold the slot a child needs (see ``RemoteWorker``).
final class DurableScope: JobScope, @unchecked Sendable {
  // @unchecked Sendable: the counter lives in a locked box; the rest is immutable.

  /// The parent's row id.
  let rowID: Int64
  /// The parent's key: a child's stored key is this, the separator, then its own key.
  let key: String
  /// Told `true` when the handler starts waiting for a child with no other wait going on,
  /// `false` when its last wait ended.
  private let onWaiting: @Sendable (Bool) -> Void
  private let state = Locked((waits: 0, abandoned: false))

  /// Separates a parent's key from its child's key in the child's stored key: a child key
  /// that contains it is refused (``RemoteQueueError/Code/invalidKey``), so that two scoped keys
  /// never collide.
  static let separator: Character = "\u{1F}"

  init(rowID: Int64, key: String, onWaiting: @escaping @Sendable (Bool) -> Void) {
    self.rowID = rowID
    self.key = key
    self.onWaiting = onWaiting
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

  /// The scope of the code running now: bound by a worker's handler run, or handed down to the
  /// job this code runs in.
  static var current: DurableScope? {
    JobController.currentScope as? DurableScope
  }
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
