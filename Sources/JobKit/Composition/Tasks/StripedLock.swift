import Foundation

/// A fixed set of `NSLock`s shared by many small objects, each object using the lock its address
/// picks. For objects made by the thousand whose own state is only touched a few times (a
/// ``BlockTask``'s context, a ``Pipeline``'s phase): on Linux every `NSLock` is an object and three
/// more allocations, which cost more than such an object's whole state. Contention stays rare:
/// a lock is held only for a field read or write, never while user code runs.
enum StripedLock {
  private static let stripeCount = 64
  private static let locks = (0..<stripeCount).map { _ in NSLock() }

  /// Runs `body` holding the lock of `object`. `body` must only touch state, never call user code.
  @inline(__always)
  static func withLock<Result>(for object: AnyObject, _ body: () throws -> Result) rethrows -> Result {
    let address = UInt(bitPattern: ObjectIdentifier(object))
    let lock = locks[Int((address >> 4) % UInt(stripeCount))]
    lock.lock()
    defer { lock.unlock() }
    return try body()
  }
}
