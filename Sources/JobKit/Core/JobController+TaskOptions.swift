import Foundation

/// Tracking with ``TaskOptions``: a timeout per attempt, retries, or both.
extension JobController {
  /// Tracks a task made by `make`, with a timeout for each attempt and a retry policy, either or
  /// both (see ``TaskOptions``); each attempt is added to ``taskQueue``. When it finishes,
  /// `completion` gets it instead of ``taskFinished(_:)``, serially with the job's other
  /// callbacks.
  ///
  /// `make(attempt)` builds a fresh operation for each attempt (1, 2, …): an `Operation` cannot
  /// run twice. With a timeout, each attempt still running after `options.timeout` is cancelled
  /// and counts as failed with ``JobKitError/Code/timedOut``; with a retry policy too, such an
  /// attempt is retried like any failed one (if `retryIf` agrees with that error), once it has
  /// actually finished. Routing sees one finished task: the successful attempt, or the last
  /// failed one. `make` runs on the thread that tracks the first attempt, then on the thread
  /// that ends a retry delay, never while JobKit holds a lock.
  public func trackAndQueue<T: Operation>(
    options: TaskOptions,
    _ make: @escaping @Sendable (_ attempt: Int) -> T,
    completion: @escaping @Sendable (T) -> Void
  ) {
    trackAttempt(1, options: options, make: make, completion: completion, replacing: nil)
  }

  /// Like ``trackAndQueue(options:_:completion:)``, without a completion closure: the task that
  /// finished (the successful attempt, or the last failed one) is routed to ``taskFinished(_:)``.
  public func trackAndQueue<T: Operation>(
    options: TaskOptions,
    _ make: @escaping @Sendable (_ attempt: Int) -> T
  ) {
    trackAttempt(1, options: options, make: make, completion: nil, replacing: nil)
  }

  /// Tracks `task`, adds it to ``taskQueue`` and cancels it if it still runs after `timeout`,
  /// like ``trackAndQueue(_:timeout:completion:)``, but the finished task is routed to
  /// ``taskFinished(_:)``.
  public func trackAndQueue(_ task: Operation, timeout: Duration) {
    trackAttempt(1, options: TaskOptions(timeout: timeout), make: { _ in task }, completion: nil, replacing: nil)
  }

  /// Makes attempt `number`, tracks it (in place of `previous`, the failed attempt before it)
  /// and arms its timeout.
  func trackAttempt<T: Operation>(
    _ number: Int,
    options: TaskOptions,
    make: @escaping @Sendable (Int) -> T,
    completion: (@Sendable (T) -> Void)?,
    replacing previous: TrackedTask?
  ) {
    let task = make(number)
    let attempt = options.retry.map { policy in
      RetryAttempt(number: number, policy: policy) { [unowned self] failed in
        trackAttempt(number + 1, options: options, make: make, completion: completion, replacing: failed)
      }
    }
    let node = track(task, queue: taskQueue, replacing: previous) { group in
      let node: TrackedTask
      if let completion {
        node = TrackedTaskWithCompletion(job: self, task: task, group: group, completion: completion)
      } else {
        node = TrackedTask(job: self, task: task, group: group)
      }
      node.extras = TaskExtras(retry: attempt)
      return node
    }
    if let node, let timeout = options.timeout {
      armTimeout(timeout, for: node)
    }
  }
}
