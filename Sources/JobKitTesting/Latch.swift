import Foundation

/// A one-shot gate for tests: ``wait(timeout:)`` blocks until ``open()`` was called (or the
/// timeout passed), so a test waits on an event instead of sleeping. Opening it twice is harmless.
public final class Latch: @unchecked Sendable {
  // @unchecked Sendable: the state lives behind `condition`.
  private let condition = NSCondition()
  private var isOpen = false

  /// Creates a closed latch.
  public init() {}

  /// Opens the latch, releasing every current and future waiter. Safe from any thread.
  public func open() {
    condition.lock()
    isOpen = true
    condition.broadcast()
    condition.unlock()
  }

  /// Whether ``open()`` was called.
  public var opened: Bool {
    condition.lock()
    defer { condition.unlock() }
    return isOpen
  }

  /// Blocks the calling thread until the latch is open. Returns `false` if `timeout` (seconds)
  /// passed first. Do not call it from async code that must not block (use ``waitOpen()``).
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
  /// without blocking a Swift concurrency thread.
  @discardableResult
  public func waitOpen(timeout seconds: Double = 30) async -> Bool {
    await withCheckedContinuation { continuation in
      DispatchQueue.global().async {
        continuation.resume(returning: self.wait(timeout: seconds))
      }
    }
  }
}
