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
///
/// A box made `contended` is one several threads take at once as a matter of course (a job's:
/// `main()`'s thread tracks and routes while every thread that finishes a task records it).
/// With glibc its mutex is adaptive (`PTHREAD_MUTEX_ADAPTIVE_NP`): a waiter spins briefly before
/// it sleeps in the kernel, because the sections are short (state only) while a sleep and its
/// wake-up cost microseconds: finishing threads asleep on a job's lock leave a core idle while
/// `main()`'s thread tracks. Other boxes keep the plain mutex, whose unlock is a few
/// instructions cheaper.
struct LockedBox<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched inside `withLock`, which holds the mutex.
  private let storage: LockedStorage<Value>

  /// A box holding `value`, which is made right in the box's allocation: a state struct is
  /// not built, copied in and destroyed (a retain and a release per reference it holds, per
  /// box).
  init(_ value: @autoclosure () -> Value, contended: Bool = false) {
    storage = LockedStorage.make(value, contended: contended)
  }

  /// Runs `body` with exclusive access to the value. `body` must not call user code.
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    try storage.withLock(body)
  }

  #if canImport(Glibc)
    /// Whether the mutex spins before it sleeps (glibc's mutex kind; for the tests).
    var isAdaptive: Bool {
      storage.withUnsafeMutablePointerToElements { mutex in
        // glibc keeps the type in the low bits of `__kind` (the high ones are flags).
        mutex.pointee.__data.__kind & 0x7f == Int32(PTHREAD_MUTEX_ADAPTIVE_NP)
      }
    }
  #endif
}

/// The storage of a ``LockedBox``: the value as the buffer's header, the mutex as its one element.
final class LockedStorage<Value>: ManagedBuffer<Value, pthread_mutex_t> {
  static func make(_ value: () -> Value, contended: Bool) -> LockedStorage {
    let buffer = create(minimumCapacity: 1) { _ in value() }
    buffer.withUnsafeMutablePointerToElements { mutex in
      mutex.initialize(to: pthread_mutex_t())
      let status: Int32
      #if canImport(Glibc)
        if contended {
          var attributes = pthread_mutexattr_t()
          pthread_mutexattr_init(&attributes)
          pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
          status = pthread_mutex_init(mutex, &attributes)
          pthread_mutexattr_destroy(&attributes)
        } else {
          status = pthread_mutex_init(mutex, nil)
        }
      #else
        status = pthread_mutex_init(mutex, nil)
      #endif
      precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }
    // `create` makes an instance of the class it is called on.
    return buffer as! LockedStorage
  }

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
