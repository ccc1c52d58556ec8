import Foundation

/// A one-shot gate for tests: a test waits on an event instead of sleeping. Opening it twice is
/// harmless.
///
/// From async code, `await` ``waitOpen(timeout:)``: it suspends without blocking a thread. From
/// synchronous code (a task's body, a callback that must hold a task back), ``wait(timeout:)``
/// blocks the calling thread.
public final class Latch: @unchecked Sendable {
  // @unchecked Sendable: the state lives behind `condition`.
  private let condition = NSCondition()
  private var isOpen = false
  private var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
  private var nextWaiter: UInt64 = 0

  /// Creates a closed latch.
  public init() {}

  /// Opens the latch, releasing every current and future waiter. Safe from any thread.
  public func open() {
    condition.lock()
    isOpen = true
    let suspended = waiters.values
    waiters = [:]
    condition.broadcast()
    condition.unlock()
    for continuation in suspended {
      continuation.resume(returning: true)
    }
  }

  /// Whether ``open()`` was called.
  public var opened: Bool {
    condition.lock()
    defer { condition.unlock() }
    return isOpen
  }

  /// Blocks the calling thread until the latch is open. Returns `false` if `timeout` (seconds)
  /// passed first. From async code, use ``waitOpen(timeout:)`` instead.
  @discardableResult
  public func wait(timeout seconds: Double = 30) -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    condition.lock()
    defer { condition.unlock() }
    while !isOpen {
      if !condition.wait(until: deadline) { return isOpen }
    }
    return true
  }

  /// Suspends until the latch is open (or `timeout` seconds passed; then returns `false`),
  /// without blocking a thread.
  @discardableResult
  public func waitOpen(timeout seconds: Double = 30) async -> Bool {
    await withCheckedContinuation { continuation in
      condition.lock()
      if isOpen {
        condition.unlock()
        continuation.resume(returning: true)
        return
      }
      nextWaiter += 1
      let id = nextWaiter
      waiters[id] = continuation
      condition.unlock()
      DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
        condition.lock()
        let expired = waiters.removeValue(forKey: id)
        condition.unlock()
        expired?.resume(returning: false)
      }
    }
  }
}
