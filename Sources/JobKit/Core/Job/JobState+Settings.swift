import Foundation

/// The transitions a job's settings go through: its failure policy, clock, grace period, time
/// limit, per-type completion handlers, event listeners and the object its admitted tasks are
/// handed. Each runs under the job's lock; whatever it replaces is returned, so the caller
/// releases it after the lock (it may be the last reference to a user's value).
extension JobState {
  /// Failures routed from now on follow `policy`.
  mutating func setFailurePolicy(_ policy: FailurePolicy) {
    failurePolicy = policy
  }

  /// Delays and timeouts armed from now on wait on `newClock`. Returns the clock replaced.
  mutating func replaceClock(with newClock: any JobClock) -> any JobClock {
    exchange(&clock, with: newClock)
  }

  /// Stops from now on report unfinished tasks after `period` (`nil`: never).
  mutating func setCancellationGracePeriod(_ period: Duration?) {
    cancellationGracePeriod = period
  }

  /// Sets (or, with `nil`, removes) the time limit. Returns `false`, changing nothing, once the
  /// job started: the limit is measured from the start.
  mutating func setTimeLimit(_ limit: Duration?) -> Bool {
    timeLimit.set(limit)
  }

  /// The job starts: returns its time limit to schedule on its clock (`nil`: none).
  mutating func beginTimeLimit() -> Duration? {
    timeLimit.begin()
  }

  /// The time limit's timer was scheduled. Returns `false` if it is no longer needed (the job
  /// finished, or the timer fired already): the caller cancels it.
  mutating func timeLimitScheduled(_ timer: any JobTimer) -> Bool {
    timeLimit.scheduled(timer)
  }

  /// The time limit's timer fired. Returns whether the limit ran out before the job finished
  /// (then the caller fails the job), the fired timer to release after the lock, and who follows
  /// this job's nested jobs (a timeline marks the moment).
  mutating func timeLimitFired() -> (ranOut: Bool, timer: (any JobTimer)?, followers: [any NestedJobFollower]) {
    let (ranOut, timer) = timeLimit.expire()
    return (ranOut, timer, ranOut ? listeners.nestedJobFollowers : [])
  }

  /// Sets the handler called when the last tracked task of dynamic type `type` was routed.
  /// Returns the handler replaced.
  mutating func replaceCompletion(
    forGroup type: Operation.Type, with handler: @escaping @Sendable () -> Void
  ) -> (@Sendable () -> Void)? {
    registry.group(for: type).replaceHandler(with: handler)
  }

  /// The listener `id` stopped listening. Returns its nested-job follower, if it had one.
  mutating func removeListener(_ id: UInt64) -> (any NestedJobFollower)? {
    listeners.remove(id)
  }

  /// Every task leaving the admission line from now on is handed `object` (a group's context).
  /// Returns the object replaced.
  mutating func replaceSharedAdmission(with object: AnyObject?) -> AnyObject? {
    admission.replaceShared(with: object)
  }
}
