import Foundation

extension JobController {
  /// What the job does when a task fails. Default ``FailurePolicy/ignore``. Safe to set from any
  /// thread; it applies to failures routed after the change (set it in `main()` or before).
  public var failurePolicy: FailurePolicy {
    get { jobState.withLock { $0.failurePolicy } }
    set { jobState.withLock { $0.failurePolicy = newValue } }
  }

  /// The clock retry delays and timeouts wait on. Default ``DispatchJobClock`` (real time).
  ///
  /// Tests give a job a clock they advance by hand (`ManualClock` from `JobKitTesting`), so a
  /// retry or timeout test neither waits nor depends on timing. Safe to set from any thread; it
  /// applies to delays and timeouts armed after the change (set it before starting the job).
  public var clock: any JobClock {
    get { jobState.withLock { $0.clock } }
    set {
      let replaced = jobState.withLock { exchange(&$0.clock, with: newValue) }
      _ = replaced  // released after the lock: it may be the user's clock
    }
  }

  /// Every tracked task that finished with an error, in the order they were routed, whatever the
  /// ``failurePolicy``. A retried task appears only if its last attempt failed; tasks the job
  /// cancelled itself are not listed. Safe to read from any thread.
  public var failures: [TaskFailure] {
    jobState.withLock { $0.failures }
  }

  /// Lets at most `limit` tasks of dynamic type `group` that the job queues (`trackAndQueue…`)
  /// execute at once. Further ones wait inside the job, in tracking order, and are queued as
  /// earlier ones finish; other groups are unaffected. Tasks you queue yourself (`track`) are not
  /// counted. The limit holds while the job stops too: a task is queued only once it holds a slot.
  /// A cancel or fail cancels the waiting ones; they keep their place and, as slots free up,
  /// finish cancelled without running, and are routed by the usual rules.
  ///
  /// Safe from any thread, at any time; raising a limit admits waiting tasks at once. Set it
  /// before tracking the group's tasks: tasks queued while the group had no limit are not
  /// counted against it. A limit below 1 is reported as ``JobKitError/Code/invalidLimit`` and
  /// ignored.
  public func setMaxConcurrentTasks<T: Operation>(_ limit: Int, forGroup group: T.Type) {
    guard limit >= 1 else {
      reportMisuse(
        .invalidLimit, "setMaxConcurrentTasks(\(limit), forGroup: \(group)) needs a limit of 1 or more; ignored")
      return
    }
    queueAdmitted(jobState.withLock { $0.setLimit(limit, for: group) })
  }

  /// Tracks `task`, adds it to ``taskQueue`` and cancels it if it still runs after `timeout`. A
  /// timed-out task counts as failed with ``JobKitError/Code/timedOut`` (see ``failures`` and
  /// ``failurePolicy``) and is routed as usual once it finished: `completion` gets it. A task that
  /// finishes in time is unaffected, and the timeout never fires after the task finished.
  public func trackAndQueue<T: Operation>(
    _ task: T,
    timeout: Duration,
    completion: @escaping @Sendable (T) -> Void
  ) {
    trackAttempt(1, options: TaskOptions(timeout: timeout), make: { _ in task }, completion: completion, replacing: nil)
  }

  /// Tracks a task that is retried when it fails: `make(attempt)` builds a fresh operation for
  /// each attempt (1, 2, …), because an `Operation` cannot run twice. Each attempt is added to
  /// ``taskQueue``.
  ///
  /// When an attempt fails (a ``ConcurrentOperation`` finishing with an error other than
  /// `CancellationError`), `policy.retryIf` is asked; if it agrees and attempts remain, the next
  /// attempt starts after the policy's delay, without blocking a thread. Routing sees one
  /// finished task: the successful attempt, or the last failed one, which `completion` receives.
  /// Earlier attempts are not failures. Cancelling the job cancels a pending retry at once (the
  /// failed attempt is then routed, silently). `make` runs on the thread that tracks the first
  /// attempt, then on a global dispatch queue thread, never while JobKit holds a lock.
  public func trackAndQueue<T: Operation>(
    retrying policy: RetryPolicy,
    _ make: @escaping @Sendable (_ attempt: Int) -> T,
    completion: @escaping @Sendable (T) -> Void
  ) {
    trackAttempt(1, options: TaskOptions(retry: policy), make: make, completion: completion, replacing: nil)
  }
}
