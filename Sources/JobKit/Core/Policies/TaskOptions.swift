import Foundation

/// How a job runs one task it tracks and queues: a timeout for each attempt, a retry policy, or
/// both. Pass it to ``JobController/trackAndQueue(options:_:completion:)``.
///
/// ```swift
/// let options = TaskOptions(timeout: .seconds(5), retry: RetryPolicy(maxAttempts: 3))
/// trackAndQueue(options: options) { attempt in Fetch(url) } completion: { fetch in … }
/// ```
///
/// See <doc:PoliciesAndObservation> for how timeouts and retries combine.
public struct TaskOptions: Sendable {
  /// How long each attempt may run, measured on the job's ``JobController/clock`` from the
  /// moment the attempt is tracked. `nil` (the default): no timeout.
  public var timeout: Duration?
  /// How failed attempts are retried. `nil` (the default): one attempt.
  public var retry: RetryPolicy?

  /// Creates options; both default to `nil` (one attempt, no timeout).
  public init(timeout: Duration? = nil, retry: RetryPolicy? = nil) {
    self.timeout = timeout
    self.retry = retry
  }
}
