#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value that is only ever read or written while holding a mutex.
///
/// Every stateful JobKit type keeps its whole state in one `LockedBox` and changes it through pure
/// transition functions (see `OperationState` and `JobState`), so the lock is never held while user
/// code, KVO notifications or continuations run.
///
/// The value and a `pthread_mutex_t` share one allocation (a `ManagedBuffer`, as swift-nio's
/// `NIOLockedValueBox` does): an `NSLock` on Linux is an object of its own plus its mutex, which
/// costs every task several allocations. ThreadSanitizer understands pthread mutexes, unlike
/// `Synchronization.Mutex`, on which it reports false races with this toolchain on Linux.
struct LockedBox<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched inside `withLock`, which holds the mutex.
  private let storage: LockedStorage<Value>

  init(_ value: Value) {
    storage = LockedStorage.make(value)
  }

  /// Runs `body` with exclusive access to the value. `body` must not call user code.
  @inline(__always)
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    try storage.withLock(body)
  }
}

/// The storage of a ``LockedBox``: the value as the buffer's header, the mutex as its one element.
final class LockedStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
  static func make(_ value: Value) -> LockedStorage {
    let buffer = create(minimumCapacity: 1) { _ in value }
    buffer.withUnsafeMutablePointerToElements { mutex in
      mutex.initialize(to: pthread_mutex_t())
      let status = pthread_mutex_init(mutex, nil)
      precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }
    // `create` makes an instance of the class it is called on.
    return unsafeDowncast(buffer, to: LockedStorage.self)
  }

  @inline(__always)
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    try withUnsafeMutablePointers { value, mutex in
      pthread_mutex_lock(mutex)
      defer { pthread_mutex_unlock(mutex) }
      return try body(&value.pointee)
    }
  }

  deinit {
    withUnsafeMutablePointerToElements { mutex in
      pthread_mutex_destroy(mutex)
      mutex.deinitialize(count: 1)
    }
  }
}
