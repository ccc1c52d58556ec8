import Foundation

extension JobController {
  /// What the job does when a task fails. Default ``FailurePolicy/ignore``. Safe to set from any
  /// thread; it applies to failures routed after the change (set it in `main()` or before).
  public var failurePolicy: FailurePolicy {
    get { readJobState { $0.failurePolicy } }
    set { withJobState { $0.setFailurePolicy(newValue) } }
  }

  /// The clock retry delays and timeouts wait on. Default ``DispatchJobClock`` (real time).
  ///
  /// Tests give a job a clock they advance by hand (`ManualClock` from `JobKitTesting`), so a
  /// retry or timeout test neither waits nor depends on timing. Safe to set from any thread; it
  /// applies to delays and timeouts armed after the change (set it before starting the job).
  public var clock: any JobClock {
    get { readJobState { $0.clock } }
    set {
      let replaced = withJobState { $0.replaceClock(with: newValue) }
      _ = replaced  // released after the lock: it may be the user's clock
    }
  }

  /// Every tracked task that finished with an error, in the order they were routed, whatever the
  /// ``failurePolicy``. A retried task appears only if its last attempt failed; tasks the job
  /// cancelled itself are not listed. Safe to read from any thread.
  public var failures: [TaskFailure] {
    readJobState { $0.failures }
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
    performExits(withJobState { $0.setLimit(limit, for: group) })
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

/// Retry delays and timeouts, scheduled on the job's ``JobController/clock`` with no lock held.
extension JobController {
  /// If `node`'s attempt failed and its policy allows another, schedules the next attempt after
  /// the policy's delay on the job's clock (no thread waits) and returns `true`. The failed
  /// attempt gives its group slot back meanwhile.
  func scheduleRetry(of node: TaskNode, _ retry: RetryAttempt) -> Bool {
    guard retry.number < retry.policy.maxAttempts, let error = retryableError(of: node),
      retry.policy.retryIf(error)
    else { return false }
    // `timing` never changes once the node is published: read it without the lock.
    let now = node.timing != nil ? ContinuousClock.now : nil
    guard let (exits, timeout) = withJobState({ $0.beginRetry(of: node, at: now) }) else { return false }
    timeout?.cancel()
    performExits(exits)
    var generator = SystemRandomNumberGenerator()
    let delay = retry.policy.delay(beforeAttempt: retry.number + 1, using: &generator)
    // Weak: a timer that outlives the job (a clock may hold cancelled timers) must not keep it.
    let timer = clock.schedule(after: delay) { [weak self, weak node] in
      guard let self, let node, let claimed = self.withJobState({ $0.claimRetry(of: node) }) else { return }
      _ = claimed  // the delay's timer, released after the lock
      retry.trackNext(node)
    }
    if !withJobState({ $0.retryScheduled(timer, for: node) }) {
      timer.cancel()
    }
    return true
  }

  /// Why `node`'s finished attempt failed, if it may be retried: its timeout expired, or it is a
  /// ``ConcurrentOperation`` that finished with an error other than a cancel.
  private func retryableError(of node: TaskNode) -> (any Error)? {
    if readJobState({ $0.timedOut(node) }) {
      return JobKitError.timedOut(node.operation)
    }
    guard let error = (node.operation as? ConcurrentOperation)?.error, !(error is CancellationError),
      !node.operation.isCancelled
    else { return nil }
    return error
  }

  /// Arms a timeout for `node` on the job's clock: if its task still runs after `timeout`, it is
  /// cancelled and counts as failed with ``JobKitError/Code/timedOut``.
  func armTimeout(_ timeout: Duration, for node: TaskNode) {
    guard withJobState({ $0.armTimeout(for: node) }) else { return }
    let timer = clock.schedule(after: timeout) { [weak self, weak node] in
      // Ask the task whether it finished with no lock held (`isFinished` may be overridden).
      guard let self, let node, let task = self.readJobState({ $0.armedTask(of: node) }), !task.isFinished,
        let expired = self.withJobState({ $0.timeoutExpired(for: node) })
      else { return }
      expired.task.cancel(handingDown: JobKitError.timedOut(expired.task))
    }
    if !withJobState({ $0.timeoutScheduled(timer, for: node) }) {
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

/// Reporting tasks that do not finish after the job cancelled them.
extension JobController {
  /// How long after the job was cancelled or failed it waits before reporting the tracked tasks
  /// that are still unfinished, or `nil` to never report them. Default 10 seconds, measured on
  /// the job's ``clock``.
  ///
  /// A stopped job always waits for every task it cancelled to actually finish, so that nothing
  /// it started outlives it. A task that ignores its cancel (a ``ConcurrentOperation`` whose
  /// ``ConcurrentOperation/operationCancelled()`` neither stops the work nor calls
  /// ``ConcurrentOperation/operationDone(error:)``, and whose work never ends) therefore keeps
  /// the job, and any group containing it, from finishing. So that such a hang is never silent,
  /// once this period passed after the stop the job reports one
  /// ``JobKitError/Code/unfinishedAfterCancel`` naming those tasks (in
  /// ``ConcurrentOperation/misuses`` and to ``JobKitDiagnostics``), and keeps waiting. Nested
  /// jobs report their own tasks, so the task at fault is named by the job that tracks it.
  ///
  /// Safe to set from any thread; it applies to stops after the change.
  public var cancellationGracePeriod: Duration? {
    get { readJobState { $0.cancellationGracePeriod } }
    set { withJobState { $0.setCancellationGracePeriod(newValue) } }
  }

  /// The job just stopped with tasks still tracked: schedules the grace period on its clock.
  func armCancellationGrace() {
    let (period, clock) = readJobState { ($0.cancellationGracePeriod, $0.clock) }
    guard let period else { return }
    // Weak: a clock may hold the timer after the job finished; it must not keep the job.
    let timer = clock.schedule(after: period) { [weak self] in
      self?.reportUnfinishedAfterGrace(period)
    }
    if !withJobState({ $0.graceScheduled(timer) }) {
      timer.cancel()
    }
  }

  private func reportUnfinishedAfterGrace(_ period: Duration) {
    // `isFinished` and `name` may be overridden: ask them with no lock held.
    let unfinished = withJobState { $0.graceEnded() }.filter { !$0.isFinished }
    guard !unfinished.isEmpty else { return }
    let shown = unfinished.prefix(10).map { task in
      task.name.map { "\(type(of: task)) \"\($0)\"" } ?? "\(type(of: task))"
    }
    let more = unfinished.count > shown.count ? " and \(unfinished.count - shown.count) more" : ""
    reportMisuse(
      .unfinishedAfterCancel,
      "\(type(of: self)) was stopped \(period) ago and still waits for \(unfinished.count) unfinished "
        + "task(s) it cancelled: \(shown.joined(separator: ", "))\(more). A task must finish when cancelled "
        + "(override operationCancelled() to stop its work and call operationDone()); the job finishes only "
        + "once they do"
    )
  }
}

/// Suspension (``ConcurrentOperation/suspend()``): the job's side, after its operation's flag
/// changed (see `JobState+Suspension.swift`).
extension JobController {
  /// Applies change number `generation` of the job's suspension: queues the tasks a resume lets
  /// go, and tells the children if no other thread is telling them.
  func applyJobSuspension(_ isSuspended: Bool, generation: UInt64) {
    let actions = withJobState { $0.setSuspended(isSuspended, generation: generation) }
    if !actions.exits.isEmpty {
      performExits(actions.exits)
    }
    if actions.tellsChildren {
      tellChildrenOfSuspension()
    }
  }

  /// Tells the children the job's latest state, as steps of this thread's step trampoline
  /// (`Trampoline.performSteps(_:)`), so a tree of nested jobs is suspended in constant stack; the
  /// last step looks again, until the children were told the latest state.
  private func tellChildrenOfSuspension() {
    guard let (suspend, children) = withJobState({ $0.nextNoticeToChildren() }) else { return }
    var steps: [() -> Void] = children.map { child in
      suspend ? { child.suspend() } : { child.resume() }
    }
    steps.append { self.tellChildrenOfSuspension() }
    Trampoline.performSteps(steps)
  }
}
