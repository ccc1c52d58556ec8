import Foundation

/// Where a job's timed work waits: the delay before a retry
/// (``JobController/trackAndQueue(retrying:_:completion:)``) and a task's timeout
/// (``JobController/trackAndQueue(_:timeout:completion:)``).
///
/// A job uses ``DispatchJobClock`` unless you give it another one through
/// ``JobController/clock``. Tests replace it with a clock they advance by hand
/// (`ManualClock` in `JobKitTesting`), so retry and timeout tests neither wait nor measure
/// real time.
///
/// JobKit calls ``schedule(after:_:)`` with no lock held, and never from inside `action`.
public protocol JobClock: Sendable {
  /// Calls `action` once, on any thread, after `delay` has passed on this clock, unless the
  /// returned timer is cancelled first. A zero or negative delay means "as soon as possible";
  /// `action` must not run inside this call.
  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any JobTimer
}

/// A pending action scheduled on a ``JobClock``.
public protocol JobTimer: Sendable {
  /// Stops the action from running if it has not started yet, and lets go of it. Calling it
  /// again, or after the action ran, does nothing.
  func cancel()
}

extension JobClock where Self == DispatchJobClock {
  /// The default clock: real time, actions on a global dispatch queue.
  public static var dispatch: DispatchJobClock { DispatchJobClock() }
}

/// The default ``JobClock``: waits in real (monotonic) time with a dispatch timer and runs each
/// action on a global dispatch queue. A cancelled timer releases its action at once.
public struct DispatchJobClock: JobClock {
  /// Creates the clock.
  public init() {}

  /// Schedules `action` on a dispatch timer source; see ``JobClock/schedule(after:_:)``.
  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any JobTimer {
    let source = DispatchSource.makeTimerSource(queue: .global())
    let timer = DispatchJobTimer(source)
    source.setEventHandler { [timer] in
      // Cancelling first drops the handler (and what it captured) once this run ends.
      timer.cancel()
      action()
    }
    source.schedule(deadline: .now() + delay.dispatchInterval)
    source.resume()
    return timer
  }
}

/// A timer of ``DispatchJobClock``: a one-shot dispatch timer source.
final class DispatchJobTimer: JobTimer, @unchecked Sendable {
  // @unchecked Sendable: `source` is a thread-safe dispatch object, never reassigned.
  private let source: any DispatchSourceTimer

  init(_ source: any DispatchSourceTimer) {
    self.source = source
  }

  func cancel() {
    source.cancel()
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// The duration as a `DispatchTimeInterval`, in nanoseconds (negative durations count as 0).
  var dispatchInterval: DispatchTimeInterval {
    .nanoseconds(Int(min(max(0, seconds * 1e9), Double(Int.max / 2))))
  }
}
