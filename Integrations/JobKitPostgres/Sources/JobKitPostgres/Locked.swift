import Foundation

/// A value behind a lock. Only state goes under it: no continuation is resumed, no user code
/// runs and nothing is awaited while it is held.
final class Locked<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched with `lock` held.
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) {
    self.value = value
  }

  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// Wakes one waiting loop: a signal that arrives while nobody waits is kept for the next wait.
/// A wait ends at a signal, at its timeout, or when the waiting task is cancelled.
final class WakeSignal: Sendable {
  private struct State {
    var pending = false
    var waiter: CheckedContinuation<Void, Never>?
  }

  private let state = Locked(State())

  /// Wakes the waiter, or the next wait if nobody waits.
  func signal() {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      guard let waiter = state.waiter else {
        state.pending = true
        return nil
      }
      state.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Suspends until a signal, `timeout` or the task's cancellation; one waiter at a time.
  func wait(timeout: Duration) async {
    let timer = Task { [weak self] in
      try? await Task.sleep(for: timeout)
      self?.signal()
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let now = state.withLock { state -> Bool in
          if state.pending || Task.isCancelled {
            state.pending = false
            return true
          }
          state.waiter = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      signal()
    }
    timer.cancel()
    // The timer may have fired as the signal came: a stale wake-up is harmless (one more look).
  }
}
