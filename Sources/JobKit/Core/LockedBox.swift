import Foundation

/// A value that is only ever read or written while holding an `NSLock`.
///
/// Every stateful JobKit type keeps its whole state in one `LockedBox` and changes it through pure
/// transition functions (see `OperationState` and `JobState`), so the lock is never held while user
/// code, KVO notifications or continuations run. `NSLock` is used instead of
/// `Synchronization.Mutex` because ThreadSanitizer on Linux reports false races on `Mutex` with this
/// toolchain, which would make the `--sanitize=thread` run meaningless.
final class LockedBox<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched inside `withLock`, which holds `lock`.
  private let lock = NSLock()
  // Only touched under `lock`, so the runtime's exclusivity check on each access is redundant.
  @exclusivity(unchecked) private var value: Value

  init(_ value: Value) {
    self.value = value
  }

  /// Runs `body` with exclusive access to the value. `body` must not call user code.
  @inline(__always)
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
