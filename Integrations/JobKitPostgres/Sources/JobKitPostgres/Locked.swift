import Foundation
import NIOConcurrencyHelpers

/// A value behind a lock: swift-nio's `NIOLockedValueBox`. Only state goes under it: no
/// continuation is resumed, no user code runs and nothing is awaited while it is held.
typealias Locked<Value> = NIOLockedValueBox<Value>

extension NIOLockedValueBox {
  /// Runs `body` with the value, the lock held (`withLockedValue`).
  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    try withLockedValue(body)
  }
}

/// Wakes one waiting loop: a signal that arrives while nobody waits is kept for the next wait.
/// A wait ends at a signal, at its timeout, or when the waiting task is cancelled. A wait's
/// timeout ends that wait only: a timer that outlives its wait (cancelled, or firing as a signal
/// came) neither ends the next wait nor leaves a signal behind.
final class WakeSignal: Sendable {
  private struct State {
    var pending = false
    var waiter: CheckedContinuation<Void, Never>?
    /// The current wait's number, so that an earlier wait's timer leaves it alone.
    var generation: UInt64 = 0
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

  /// Whether a signal waits for the next wait (for tests).
  var isPending: Bool {
    state.withLock { $0.pending }
  }

  /// Ends wait number `generation` if it still waits.
  private func expire(_ generation: UInt64) {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      guard state.generation == generation, let waiter = state.waiter else { return nil }
      state.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Suspends until a signal, `timeout` (none: `nil`, for a loop that is always signalled) or
  /// the task's cancellation; one waiter at a time.
  func wait(timeout: Duration?) async {
    let generation = state.withLock { state -> UInt64 in
      state.generation &+= 1
      return state.generation
    }
    let timer = timeout.map { timeout in
      Task { [weak self] in
        do {
          try await Task.sleep(for: timeout)
        } catch {
          return
        }
        self?.expire(generation)
      }
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
      expire(generation)
    }
    timer?.cancel()
    // The timer's end is awaited, so that nothing of this wait outlives it.
    await timer?.value
  }
}
