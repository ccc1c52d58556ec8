import Foundation

/// Retry delays and timeouts, scheduled on the job's ``JobController/clock`` with no lock held.
extension JobController {
  /// If `node`'s attempt failed and its policy allows another, schedules the next attempt after
  /// the policy's delay on the job's clock (no thread waits) and returns `true`. The failed
  /// attempt gives its group slot back meanwhile.
  func scheduleRetry(of node: TrackedTask, _ retry: RetryAttempt) -> Bool {
    guard retry.number < retry.policy.maxAttempts, let error = retryableError(of: node),
      retry.policy.retryIf(error)
    else { return false }
    // `observesEvents` never changes once the node is published: read it without the lock.
    let now = node.extras?.observesEvents == true ? ContinuousClock.now : nil
    guard let (admitted, timeout) = jobState.withLock({ $0.beginRetry(of: node, at: now) }) else { return false }
    timeout?.cancel()
    queueAdmitted(admitted)
    var generator = SystemRandomNumberGenerator()
    let delay = retry.policy.delay(beforeAttempt: retry.number + 1, using: &generator)
    // Weak: a timer that outlives the job (a clock may hold cancelled timers) must not keep it.
    let timer = clock.schedule(after: delay) { [weak self, weak node] in
      guard let self, let node, self.jobState.withLock({ $0.claimRetry(of: node) }) else { return }
      retry.trackNext(node)
    }
    if !jobState.withLock({ $0.retryScheduled(timer, for: node) }) {
      timer.cancel()
    }
    return true
  }

  /// Why `node`'s finished attempt failed, if it may be retried: its timeout expired, or it is a
  /// ``ConcurrentOperation`` that finished with an error other than a cancel.
  private func retryableError(of node: TrackedTask) -> (any Error)? {
    if jobState.withLock({ $0.timedOut(node) }) {
      return JobKitError.timedOut(node.operation)
    }
    guard let error = (node.operation as? ConcurrentOperation)?.error, !(error is CancellationError),
      !node.operation.isCancelled
    else { return nil }
    return error
  }

  /// Arms a timeout for `node` on the job's clock: if its task still runs after `timeout`, it is
  /// cancelled and counts as failed with ``JobKitError/Code/timedOut``.
  func armTimeout(_ timeout: Duration, for node: TrackedTask) {
    guard jobState.withLock({ $0.armTimeout(for: node) }) else { return }
    let timer = clock.schedule(after: timeout) { [weak self, weak node] in
      // Ask the task whether it finished with no lock held (`isFinished` may be overridden).
      guard let self, let node, let task = self.jobState.withLock({ $0.armedTask(of: node) }), !task.isFinished,
        let expired = self.jobState.withLock({ $0.timeoutExpired(for: node) })
      else { return }
      expired.cancel()
    }
    if !jobState.withLock({ $0.timeoutScheduled(timer, for: node) }) {
      timer.cancel()
    }
  }
}

extension JobKitError {
  /// The error a task that ran past its timeout stands for.
  static func timedOut(_ task: Operation) -> JobKitError {
    JobKitError(.timedOut, message: "\(type(of: task)) timed out")
  }
}
