import Foundation

/// How ``JobController/trackAndQueue(retrying:_:completion:)`` retries a failing task.
///
/// Attempt `n + 1` starts `initialDelay × multiplier^(n-1)` after attempt `n` failed, capped at
/// `maxDelay`, and with `jitter` moved at random by up to ±50%. A thread is never blocked while
/// waiting. Attempts stop after `maxAttempts`, or at once when `retryIf` returns `false` for the
/// error.
public struct RetryPolicy: Sendable {
  /// The most attempts made, including the first. At least 1.
  public let maxAttempts: Int
  /// The wait before the second attempt.
  public let initialDelay: Duration
  /// How much each wait grows over the previous one.
  public let multiplier: Double
  /// The longest wait.
  public let maxDelay: Duration
  /// Whether each wait is moved at random by up to ±50%, so that many failing tasks do not retry
  /// in lockstep.
  public let jitter: Bool
  /// Decides whether an error is worth another attempt. Called on the thread that finished the
  /// failed attempt, never while JobKit holds a lock.
  public let retryIf: @Sendable (any Error) -> Bool

  /// Creates a policy. `maxAttempts` below 1 is treated as 1; a negative delay or a multiplier
  /// below 1 is treated as 0 or 1.
  public init(
    maxAttempts: Int,
    initialDelay: Duration = .milliseconds(100),
    multiplier: Double = 2,
    maxDelay: Duration = .seconds(30),
    jitter: Bool = true,
    retryIf: @escaping @Sendable (any Error) -> Bool = { _ in true }
  ) {
    self.maxAttempts = max(1, maxAttempts)
    self.initialDelay = max(.zero, initialDelay)
    self.multiplier = max(1, multiplier)
    self.maxDelay = max(.zero, maxDelay)
    self.jitter = jitter
    self.retryIf = retryIf
  }

  /// The wait before attempt `attempt` (2 or more), before jitter: `initialDelay ×
  /// multiplier^(attempt-2)`, capped at `maxDelay`.
  public func baseDelay(beforeAttempt attempt: Int) -> Duration {
    let exponent = Double(max(0, attempt - 2))
    let seconds = initialDelay.seconds * pow(multiplier, exponent)
    return .seconds(min(seconds, maxDelay.seconds))
  }

  /// The wait before attempt `attempt`, with jitter applied if enabled.
  func delay<Generator: RandomNumberGenerator>(
    beforeAttempt attempt: Int,
    using generator: inout Generator
  ) -> Duration {
    let base = baseDelay(beforeAttempt: attempt).seconds
    guard jitter, base > 0 else { return .seconds(base) }
    return .seconds(base * Double.random(in: 0.5...1.5, using: &generator))
  }
}

/// One attempt of a retried task: its number, the policy, and how to track the next attempt in
/// its place.
final class RetryAttempt: Sendable {
  let number: Int
  let policy: RetryPolicy
  /// Makes and tracks attempt `number + 1`, replacing the given node.
  let trackNext: @Sendable (TaskNode) -> Void

  init(number: Int, policy: RetryPolicy, trackNext: @escaping @Sendable (TaskNode) -> Void) {
    self.number = number
    self.policy = policy
    self.trackNext = trackNext
  }
}
