/// Swift tasks suspended until something happens, each with what it still waits for
/// (`Condition`), resumed with a `Value`: the one waiter registry of JobKit's state machines
/// (callers of `ConcurrentOperation.waitWhileSuspended()`, of a command queue's `drained()`,
/// of `JobController.waitForRoom(inGroup:)`).
///
/// A value kept under its owner's lock. A wait takes three steps, because the continuation
/// exists only inside `withCheckedContinuation` and the awaiting task may be cancelled at any
/// point: ``makeWaiter()`` (an id, before the continuation), then ``register(_:waitingFor:_:)``
/// or ``remove(_:)`` (nothing to wait for), and, from the task's cancellation handler,
/// ``cancel(_:)``, which may come before the registration. Every continuation leaves as a
/// return value, for the caller to resume after the lock: each exactly once.
struct Waiters<Condition, Value> {
  typealias Continuation = CheckedContinuation<Value, Never>

  private enum Entry {
    /// Made, its continuation not registered yet.
    case created
    /// Its task was cancelled before it registered: the registration must not wait.
    case cancelled
    case waiting(Condition, Continuation)
  }

  private var entries = [UInt64: Entry]()
  private var lastID: UInt64 = 0

  /// Whether nothing is kept: no waiter made, registered, or cancelled before it registered.
  var isEmpty: Bool { entries.isEmpty }

  /// Whether a waiter is registered (its task suspended, waiting). Linear: for inspection.
  var hasRegistered: Bool {
    entries.values.contains {
      if case .waiting = $0 { return true }
      return false
    }
  }

  /// A new waiter, before its continuation exists.
  mutating func makeWaiter() -> UInt64 {
    lastID += 1
    entries[lastID] = .created
    return lastID
  }

  /// Registers `id`'s continuation, waiting for `condition`. Returns `false`, registering
  /// nothing, if its task was cancelled first (or `id` is unknown): the caller resumes it.
  mutating func register(
    _ id: UInt64, waitingFor condition: Condition, _ continuation: Continuation
  ) -> Bool {
    guard case .created = entries[id] else {
      entries[id] = nil
      return false
    }
    entries[id] = .waiting(condition, continuation)
    return true
  }

  /// `id` has nothing to wait for: it is forgotten (the caller resumes it, or never suspended).
  mutating func remove(_ id: UInt64) {
    entries[id] = nil
  }

  /// `id`'s task was cancelled. Returns its continuation, to resume, if it was registered; else
  /// remembers the cancel for its registration.
  mutating func cancel(_ id: UInt64) -> Continuation? {
    switch entries[id] {
    case .created:
      entries[id] = .cancelled
      return nil
    case .waiting(_, let continuation):
      entries[id] = nil
      return continuation
    case .cancelled, nil:
      return nil
    }
  }

  /// Something happened: `advance` gets each registered waiter's condition and returns what it
  /// still waits for, or `nil` if it waits no more. Returns the continuations of those released,
  /// oldest waiter first.
  mutating func advance(_ advance: (Condition) -> Condition?) -> [Continuation] {
    var released: [(id: UInt64, continuation: Continuation)] = []
    for (id, entry) in entries {
      guard case .waiting(let condition, let continuation) = entry else { continue }
      if let next = advance(condition) {
        entries[id] = .waiting(next, continuation)
      } else {
        entries[id] = nil
        released.append((id, continuation))
      }
    }
    guard released.count > 1 else { return released.map(\.continuation) }
    return released.sorted { $0.id < $1.id }.map(\.continuation)
  }

  /// Releases every registered waiter. Returns their continuations.
  mutating func releaseAll() -> [Continuation] {
    advance { _ in nil }
  }
}
