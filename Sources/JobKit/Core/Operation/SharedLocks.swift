#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The mutexes that guard the state of objects made by the hundred thousand, whose state is only
/// touched a handful of times: every ``ConcurrentOperation``'s ``OperationState`` (kept in the
/// operation itself; a job's is part of its `JobState`, under the job's lock) and the state of
/// the floors' small objects (closure tasks, their result, contexts, pipelines).
/// A fixed table made once, each object using the mutex its address picks: making such an object
/// allocates no box and sets up no mutex (and freeing it tears none down), which would cost more
/// than its whole state.
///
/// A section under one only touches that object's state, for a pure transition (never while
/// holding another of these mutexes, never calling out), so two objects sharing one never
/// deadlock; they only wait for each other's short sections now and then (256 of them, 64 bytes
/// apart).
enum SharedLocks {
  private static let count = 256
  /// Bytes between two mutexes: one 64-byte cache line each (x86-64's, most arm64 Linux
  /// machines'), so that neighbours do not share one there. Apple silicon's lines are 128 bytes:
  /// there two neighbours share a line.
  private static let stride = 64

  /// The table: `count` mutexes, `stride` bytes apart. Never freed.
  private nonisolated(unsafe) static let table: UnsafeMutableRawPointer = {
    precondition(MemoryLayout<pthread_mutex_t>.size <= stride)
    let table = UnsafeMutableRawPointer.allocate(byteCount: count * stride, alignment: stride)
    for index in 0..<count {
      let mutex = (table + index * stride).initializeMemory(
        as: pthread_mutex_t.self, repeating: pthread_mutex_t(), count: 1)
      let status = pthread_mutex_init(mutex, nil)
      precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }
    return table
  }()

  /// Runs `body` holding the mutex of `object`. `body` must only touch `object`'s state: no user
  /// code, no other lock, no release of a user's value.
  static func withLock<Result>(for object: AnyObject, _ body: () throws -> Result) rethrows -> Result {
    let mutex = mutex(for: Unmanaged.passUnretained(object).toOpaque())
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return try body()
  }

  /// The mutex of the object at `object` (its address, so that asking retains nothing): one
  /// multiplication spreads addresses (objects are 16-byte aligned and often allocated in a row)
  /// over the table.
  static func mutex(for object: UnsafeMutableRawPointer) -> UnsafeMutablePointer<pthread_mutex_t> {
    let address = UInt(bitPattern: object)
    let index = Int(truncatingIfNeeded: (address &* 0x9E37_79B9_7F4A_7C15) >> 56)
    // Bound to `pthread_mutex_t` when the table was made; asked for every lock, so no check.
    return (table + index * stride).assumingMemoryBound(to: pthread_mutex_t.self)
  }
}

/// How a ``ConcurrentOperation``'s code reaches its state: `state.withLock { … }`, as with a
/// `LockedBox`, under the lock `ConcurrentOperation.withStateLocked` takes (a job's own lock for
/// a job). Holds the operation unretained (so that reaching the state retains nothing): only
/// made and used while the operation is alive.
struct OperationStateAccess {
  // Unretained: reaching an operation's state must not cost a retain (see above).
  let operation: Unmanaged<ConcurrentOperation>

  /// Runs `body` with exclusive access to the operation's state. `body` must only touch state.
  func withLock<Result>(_ body: (inout OperationState) -> Result) -> Result {
    operation._withUnsafeGuaranteedRef { $0.withStateLocked(body) }
  }
}
