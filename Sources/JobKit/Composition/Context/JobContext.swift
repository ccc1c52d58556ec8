import Foundation

/// A thread-safe store of typed values shared by a group and everything inside it, under
/// ``ContextKey``s whose `Value` type the compiler checks (how a group hands it down: <doc:GroupRules>).
///
/// ```swift
/// extension ContextKey where Value == Int {
///     static let downloaded = ContextKey("downloaded")
/// }
/// let group = ConcurrentGroup()
/// for url in urls {
///     group.add(BlockTask { context in
///         let bytes = try download(url)
///         context.update(.downloaded, default: 0) { $0 += bytes }
///     })
/// }
/// try group.runAndWait()
/// print(group.context[.downloaded] ?? 0)
/// ```
///
/// Every member may be called from any thread, with no lock of your own. A read sees the most
/// recent completed write; ``update(_:default:_:)`` loses no concurrent update.
public final class JobContext: Sendable {
  private struct Entry {
    let value: any Sendable
    /// Changes on every write of this entry, so `update` can tell whether it raced another write.
    let stamp: UInt64
  }

  private struct State {
    var entries: [ContextStorageKey: Entry] = [:]
    var lastStamp: UInt64 = 0

    /// Stores `value` under `key` (`nil` removes it). Returns the entry it replaced, for the
    /// caller to release after the lock: its value may be a user's object whose `deinit` calls
    /// back into this context.
    mutating func write(_ value: (any Sendable)?, for key: ContextStorageKey) -> Entry? {
      if let value {
        lastStamp += 1
        return entries.updateValue(Entry(value: value, stamp: lastStamp), forKey: key)
      } else {
        return entries.removeValue(forKey: key)
      }
    }
  }

  /// Only touched under `SharedLocks.withLock(for: self)`: a box and a mutex of its own would
  /// be two allocations more for every context, and every `BlockTask` started outside a group
  /// makes one.
  nonisolated(unsafe) private var storage = State()

  /// Runs `body` on the state under the context's stripe lock. `body` must only touch state.
  private func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    try SharedLocks.withLock(for: self) { try body(&storage) }
  }

  /// The context of the ``BlockTask`` whose body is running, for code the body calls that has no
  /// other way to reach it; `nil` outside a `BlockTask` body. Bound for the body's whole run,
  /// including an async body's child tasks.
  @TaskLocal public static var current: JobContext?

  /// Creates an empty context.
  public init() {}

  /// The value stored under `key`, or `nil`. Setting `nil` removes it.
  public subscript<Value>(key: ContextKey<Value>) -> Value? {
    get { withState { $0.entries[key.storageKey]?.value } as? Value }
    set {
      let replaced = withState { $0.write(newValue, for: key.storageKey) }
      _ = replaced  // released after the lock
    }
  }

  /// Changes the value under `key` in place, starting from `defaultValue` when there is none, and
  /// returns what `body` returns. No concurrent write is lost: if another thread changed the value
  /// while `body` ran, `body` runs again on the new value.
  ///
  /// `body` runs on the calling thread without any lock held, possibly more than once, so it must
  /// only compute the new value (no side effects that must happen once).
  ///
  /// ```swift
  /// let total = context.update(.count, default: 0) { count in
  ///     count += 1
  ///     return count
  /// }
  /// ```
  @discardableResult
  public func update<Value, Result>(
    _ key: ContextKey<Value>,
    default defaultValue: @autoclosure () -> Value,
    _ body: (inout Value) throws -> Result
  ) rethrows -> Result {
    let storageKey = key.storageKey
    while true {
      let entry = withState { $0.entries[storageKey] }
      var value = (entry?.value as? Value) ?? defaultValue()
      let result = try body(&value)
      let (stored, replaced) = withState { state -> (Bool, Entry?) in
        guard state.entries[storageKey]?.stamp == entry?.stamp else { return (false, nil) }
        return (true, state.write(value, for: storageKey))
      }
      _ = replaced  // released after the lock
      if stored { return result }
    }
  }

  /// Removes the value under `key` and returns it, or `nil` if there was none.
  @discardableResult
  public func removeValue<Value>(forKey key: ContextKey<Value>) -> Value? {
    // Taken out under the lock, released (if the caller drops it) after it.
    let removed = withState { $0.write(nil, for: key.storageKey) }
    return removed?.value as? Value
  }

  /// Copies into this context every value of `other` whose key this context does not have yet.
  /// Used when a nested group gives up its own context for its parent's.
  func addMissingValues(from other: JobContext) {
    guard other !== self else { return }
    let theirs = other.withState { $0.entries }
    guard !theirs.isEmpty else { return }
    withState { state in
      for (key, entry) in theirs where state.entries[key] == nil {
        _ = state.write(entry.value, for: key)  // replaces nothing: the key is missing
      }
    }
  }
}
