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

/// Wakes one waiting loop: an `AsyncStream` of wake-ups that keeps the newest one
/// (`bufferingNewest(1)`), so a signal that arrives while nobody waits ends the next wait, and
/// many signals before a wait are one wake-up. A wait ends at a signal, at its timeout, or when
/// the waiting task is cancelled (which ends the stream: every later wait returns at once, so a
/// loop checks its cancellation). The timeout is a child task of the wait, cancelled and awaited
/// before the wait returns: a timer never outlives its wait. A loop re-checks its state after
/// each wake-up: one may come early (a timer that fired as a signal came).
final class WakeSignal: Sendable {
  private let stream: AsyncStream<Void>
  private let continuation: AsyncStream<Void>.Continuation

  init() {
    (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
  }

  /// Wakes the waiter, or the next wait if nobody waits.
  func signal() {
    continuation.yield(())
  }

  /// Suspends until a signal, `timeout` (none: `nil`, for a loop that is always signalled) or
  /// the task's cancellation; one waiter at a time.
  func wait(timeout: Duration?) async {
    guard let timeout else {
      var wakeUps = stream.makeAsyncIterator()
      _ = await wakeUps.next()
      return
    }
    let stream = stream
    await withTaskGroup(of: Void.self) { group in
      group.addTask { [continuation] in
        do {
          try await Task.sleep(for: timeout)
        } catch {
          return
        }
        continuation.yield(())
      }
      var wakeUps = stream.makeAsyncIterator()
      _ = await wakeUps.next()
      group.cancelAll()
    }
  }
}
