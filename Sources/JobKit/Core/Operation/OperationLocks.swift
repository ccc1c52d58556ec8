#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The mutexes that guard every ``ConcurrentOperation``'s ``OperationState``: a fixed table made
/// once, each operation using the one its address picks. An operation's state lives in the
/// operation itself, so making a task allocates no box and sets up no mutex (and freeing it
/// tears none down): a task's state is touched a handful of times, and a mutex and a box of its
/// own cost more than that.
///
/// An operation only ever takes its own mutex, for a pure transition of its own state (never
/// while holding another operation's, never calling out), so two operations sharing one never
/// deadlock; it only makes them wait for each other's short sections now and then (256 of them,
/// 64 bytes apart).
enum OperationLocks {
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
      let mutex = (table + index * stride).bindMemory(to: pthread_mutex_t.self, capacity: 1)
      mutex.initialize(to: pthread_mutex_t())
      let status = pthread_mutex_init(mutex, nil)
      precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }
    return table
  }()

  /// The mutex of the object at `object` (its address, so that asking retains nothing): one
  /// multiplication spreads addresses (objects are 16-byte aligned and often allocated in a row)
  /// over the table.
  @inline(__always)
  static func mutex(for object: UnsafeMutableRawPointer) -> UnsafeMutablePointer<pthread_mutex_t> {
    let address = UInt(bitPattern: object)
    let index = Int(truncatingIfNeeded: (address &* 0x9E37_79B9_7F4A_7C15) >> 56)
    return (table + index * stride).assumingMemoryBound(to: pthread_mutex_t.self)
  }
}

/// How a ``ConcurrentOperation``'s code reaches its state: `state.withLock { … }`, as with a
/// `LockedBox`. Holds the operation unretained (so that reaching the state retains nothing): only
/// made and used while the operation is alive.
struct OperationStateAccess {
  let operation: Unmanaged<ConcurrentOperation>

  /// Runs `body` with exclusive access to the operation's state. `body` must only touch state.
  @inline(__always)
  func withLock<Result>(_ body: (inout OperationState) throws -> Result) rethrows -> Result {
    try operation._withUnsafeGuaranteedRef { try $0.withStateLocked(body) }
  }
}
