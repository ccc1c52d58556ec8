import Foundation

/// A job's time limit (`JobController.timeLimit`) as one value, under the job's lock: set before
/// the start, armed at the start (its timer scheduled on the job's clock with no lock held, then
/// recorded), expired when the timer fired first, or ended by the job's finish. Each transition
/// says what the caller does after the lock; none reads a clock.
struct TimeLimit {
  enum State {
    /// No limit.
    case none
    /// A limit, not started yet.
    case set(Duration)
    /// The job started: the caller schedules the timer.
    case arming
    /// The timer is scheduled.
    case armed(any JobTimer)
    /// The timer fired before the job finished: the job fails with `timeLimitExceeded`.
    case expired
    /// The job finished (or started without a limit): nothing more happens.
    case ended
  }

  private(set) var state = State.none

  /// The limit set and not started yet, if any.
  var limit: Duration? {
    if case .set(let limit) = state { return limit }
    return nil
  }

  /// Sets (or, with `nil`, removes) the limit. Returns `false`, changing nothing, once the job
  /// started: the limit is measured from the start.
  mutating func set(_ limit: Duration?) -> Bool {
    switch state {
    case .none, .set:
      state = limit.map { .set($0) } ?? .none
      return true
    case .arming, .armed, .expired, .ended:
      return false
    }
  }

  /// The job starts. Returns the limit to schedule, if one was set (`nil`: no timer).
  mutating func begin() -> Duration? {
    switch state {
    case .set(let limit):
      state = .arming
      return limit
    case .none:
      state = .ended
      return nil
    case .arming, .armed, .expired, .ended:
      return nil
    }
  }

  /// The timer was scheduled. Returns `false` if it is no longer needed (the job finished or the
  /// timer already fired): the caller cancels it.
  mutating func scheduled(_ timer: any JobTimer) -> Bool {
    guard case .arming = state else { return false }
    state = .armed(timer)
    return true
  }

  /// The timer fired. Returns whether the limit ran out before the job finished (then the caller
  /// fails the job), and the fired timer, to release after the lock.
  mutating func expire() -> (ranOut: Bool, timer: (any JobTimer)?) {
    switch state {
    case .arming:
      state = .expired
      return (true, nil)
    case .armed(let timer):
      state = .expired
      return (true, timer)
    case .none, .set, .expired, .ended:
      return (false, nil)
    }
  }

  /// The job finishes. Returns the timer to cancel after the lock, if one is armed.
  mutating func end() -> (any JobTimer)? {
    let timer: (any JobTimer)?
    if case .armed(let armed) = state { timer = armed } else { timer = nil }
    state = .ended
    return timer
  }
}

/// The job's time limit (``JobController/timeLimit``), scheduled on its clock with no lock held.
extension JobController {
  /// How long the job may run, from its start, measured on its ``clock``; `nil` (the default)
  /// for no limit. When it runs out before the job finished, the job fails as ``fail(_:)`` does,
  /// with ``JobKitError/Code/timeLimitExceeded``: ``run()`` throws it, and ``ConcurrentOperation/error``
  /// and ``ConcurrentOperation/cancellationReason`` carry it. Every task and nested job the job
  /// tracks is cancelled with that reason (each hands it down in turn), so a nested job stops
  /// after the smaller of its own limit and what is left of its parent's, all the way down. A
  /// task's own timeout (``trackAndQueue(_:timeout:completion:)``) still applies.
  ///
  /// Set it before the job starts: a change after the start is reported as
  /// ``JobKitError/Code/invalidLimit`` and ignored, as is a negative limit. Safe from any thread.
  public var timeLimit: Duration? {
    get { readJobState { $0.timeLimit.limit } }
    set {
      if let newValue, newValue < .zero {
        reportMisuse(.invalidLimit, "timeLimit was set to \(newValue), which is negative; ignored")
        return
      }
      if !withJobState({ $0.setTimeLimit(newValue) }) {
        reportMisuse(.invalidLimit, "timeLimit was set after the job started; set it before the start; ignored")
      }
    }
  }

  /// The job started with a time limit of which its scope says `used` went before (see
  /// ``JobScope``): schedules its expiry on the job's clock, at once if nothing is left.
  func armTimeLimit(_ limit: Duration, used: Duration) {
    let clock = readJobState { $0.clock }
    // Weak: a clock may hold the timer after the job finished; it must not keep the job.
    let timer = clock.schedule(after: max(.zero, limit - used)) { [weak self] in
      guard let self else { return }
      let (ranOut, fired, followers) = self.withJobState { $0.timeLimitFired() }
      _ = fired  // released after the lock
      guard ranOut else { return }
      // A timeline marks the moment (the events show only the stop's effects, later).
      if !followers.isEmpty {
        let now = ContinuousClock.now
        for follower in followers {
          follower.timeLimitReached(at: now)
        }
      }
      self.fail(JobKitError(.timeLimitExceeded, message: "\(type(of: self)) ran out of its time limit of \(limit)"))
    }
    if !withJobState({ $0.timeLimitScheduled(timer) }) {
      timer.cancel()
    }
  }
}
