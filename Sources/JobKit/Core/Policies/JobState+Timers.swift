import Foundation

/// Timeouts and retry delays. Each is armed (a flag, under the lock) before its timer is
/// scheduled on the job's clock with no lock held, then the timer is recorded, so a timer that
/// fires or is disarmed in between is never lost or left running.
extension JobState {
  /// A timeout is about to be scheduled for `node`. Returns `false` if the task already finished,
  /// its attempt waits for a retry, or the job stops: then no timeout is needed.
  mutating func armTimeout(for node: TaskNode) -> Bool {
    guard !phase.isStopping else { return false }
    return node.armTimeout()
  }

  /// The timeout's timer was scheduled. Returns `false` if it is no longer needed (the task
  /// finished, the job stopped or the timeout already fired): the caller cancels it.
  mutating func timeoutScheduled(_ timer: any JobTimer, for node: TaskNode) -> Bool {
    node.timeoutScheduled(timer)
  }

  /// `node`'s task while its timeout is armed.
  func armedTask(of node: TaskNode) -> Operation? {
    node.state.isTimeoutArmed ? node.task : nil
  }

  /// `node`'s timeout expired (the caller saw its task unfinished). Returns the task to cancel
  /// and the expired timer (released by the caller after the lock), or `nil` if the task
  /// finished (or the job stopped) meanwhile.
  mutating func timeoutExpired(for node: TaskNode) -> (task: Operation, timer: (any JobTimer)?)? {
    guard let task = node.task, let expired = node.timeoutExpired() else { return nil }
    return (task, expired.timer)
  }

  /// Whether `node`'s task timed out.
  func timedOut(_ node: TaskNode) -> Bool {
    node.state.timedOut
  }

  /// An attempt of a retried task failed with `error` and may be retried. Returns `nil` if the
  /// job is stopping (the attempt is then routed as the last one); otherwise the attempt gives
  /// back its group slot and its timeout: the result lists the waiting tasks that slot admits
  /// (the caller queues them) and the attempt's timeout timer, if any (the caller cancels it).
  /// The next attempt waits for a slot like any new task.
  ///
  /// `now` (read by the caller with no lock held while events are observed) is when the attempt
  /// finished: if a stop ends the retry delay, the attempt is routed as the task's last one, and
  /// its `taskFinished` event measures up to then.
  mutating func beginRetry(of node: TaskNode, at now: ContinuousClock.Instant? = nil)
    -> (exits: [TaskExit], timeout: (any JobTimer)?)?
  {
    guard !phase.isStopping, let release = node.beginRetry() else { return nil }
    node.timing?.finishedAt = now
    return (giveBack(release, of: node), release.timer)
  }

  /// The retry delay's timer was scheduled. Returns `false` if it is no longer needed (a stop
  /// routed the failed attempt): the caller cancels it.
  mutating func retryScheduled(_ timer: any JobTimer, for node: TaskNode) -> Bool {
    node.retryScheduled(timer)
  }

  /// The retry delay ended. Returns the delay's timer (released by the caller after the lock)
  /// if the caller must now track the next attempt, `nil` if a stop already routed the failed
  /// attempt.
  mutating func claimRetry(of node: TaskNode) -> TaskState.Release? {
    guard !phase.isStopping else { return nil }
    return node.claimRetry()
  }
}

/// The grace period after a stop, at whose end tasks still unfinished are reported.
extension JobState {
  /// The grace period's timer was scheduled. Returns `false` if the job finished meanwhile: the
  /// caller cancels it.
  mutating func graceScheduled(_ timer: any JobTimer) -> Bool {
    guard !phase.isFinished else { return false }
    graceTimer = timer
    return true
  }

  /// The grace period ended: the tracked tasks whose finish has not been seen yet (none if the
  /// job finished). The caller asks each whether it finished, with no lock held.
  mutating func graceEnded() -> [Operation] {
    graceTimer = nil
    guard !phase.isFinished else { return [] }
    return registry.nodes.lazy.filter { $0.state.isUnfinished }.compactMap(\.task)
  }
}
