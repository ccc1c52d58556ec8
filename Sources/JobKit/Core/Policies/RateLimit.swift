import Foundation

/// A group's rate limit (`JobController.setRateLimit(_:burst:forGroup:)`) as a token bucket:
/// admitting a task takes a token; a refill timer on the job's clock puts one back every
/// ``interval``, up to ``burst``. The bucket starts full. Time is never read: the refills are
/// the clock, one timer at a time, running while the bucket is not full or tasks wait for it.
/// Only touched under the job's lock; each transition says whether the caller schedules the
/// next refill.
struct RateLimit {
  /// How long one token takes to come back: one second divided by the rate.
  let interval: Duration
  /// How many tokens the bucket holds: tasks admitted at once after a quiet period.
  let burst: Int
  private(set) var tokens: Int
  /// A refill timer is scheduled (or about to be, by the caller told so).
  private(set) var isRefilling = false

  /// A full bucket for `tasksPerSecond` (positive and finite) and `burst` (1 or more).
  init(tasksPerSecond: Double, burst: Int) {
    interval = .seconds(1 / tasksPerSecond)
    self.burst = burst
    tokens = burst
  }

  /// The bucket of a new rate replacing `previous`: it keeps the tokens it had (up to its
  /// burst) and the refill timer running, so that a change never hands out a fresh burst.
  init(tasksPerSecond: Double, burst: Int, replacing previous: RateLimit?) {
    self.init(tasksPerSecond: tasksPerSecond, burst: burst)
    if let previous {
      tokens = min(burst, previous.tokens)
      isRefilling = previous.isRefilling
    }
  }

  var hasToken: Bool { tokens > 0 }

  /// A task was admitted: one token fewer (the caller checked ``hasToken``).
  mutating func take() {
    tokens -= 1
  }

  /// Returns `true` when the caller must schedule a refill: the bucket is not full, or tasks
  /// wait (`waiting`), and no refill is scheduled.
  mutating func startRefill(waiting: Bool) -> Bool {
    guard !isRefilling, tokens < burst || waiting else { return false }
    isRefilling = true
    return true
  }

  /// The refill timer fired: one token back, up to the burst. The caller admits what waits,
  /// then asks ``startRefill(waiting:)`` whether to schedule the next one.
  mutating func refill() {
    tokens = min(burst, tokens + 1)
    isRefilling = false
  }
}

/// Rate limits (``JobController/setRateLimit(_:burst:forGroup:)``): the refills, scheduled on
/// the job's clock with no lock held.
extension JobController {
  /// Lets tasks of dynamic type `group` that the job queues (`trackAndQueue…`) start at most
  /// `tasksPerSecond` per second on average, and at most `burst` at once after a quiet period:
  /// a token bucket that starts full and gets a token back every `1 / tasksPerSecond` seconds,
  /// measured on the job's ``clock`` (no thread sleeps). A task without a token waits inside the
  /// job, in tracking order, as for ``setMaxConcurrentTasks(_:forGroup:)``, with which it
  /// combines: a task is queued only once it has both a slot and a token. Tasks you queue
  /// yourself (`track`) are not counted. A stop drops the rate limit: the waiting tasks are
  /// cancelled and finish without running, as slots allow.
  ///
  /// Safe from any thread, at any time; a new rate keeps the tokens left (up to its burst). A
  /// rate that is not positive and finite, or a burst below 1, is reported as
  /// ``JobKitError/Code/invalidLimit`` and ignored.
  public func setRateLimit<T: Operation>(_ tasksPerSecond: Double, burst: Int, forGroup group: T.Type) {
    guard tasksPerSecond > 0, tasksPerSecond.isFinite, burst >= 1 else {
      reportMisuse(
        .invalidLimit,
        "setRateLimit(\(tasksPerSecond), burst: \(burst), forGroup: \(group)) needs a positive, finite rate and "
          + "a burst of 1 or more; ignored")
      return
    }
    performExits(withJobState { $0.setRateLimit(tasksPerSecond: tasksPerSecond, burst: burst, for: group) })
  }

  /// Schedules `group`'s next refill on the job's clock (an after-lock effect).
  func scheduleRefill(of group: TaskTypeEntry) {
    let (clock, interval) = readJobState { ($0.clock, group.rate?.interval) }
    guard let interval else { return }
    // Weak: a clock may hold the timer after the job finished; it must not keep the job. The
    // group entry is held: the timer refills its bucket.
    _ = clock.schedule(after: interval) { [weak self] in
      guard let self else { return }
      let refilled = self.withJobState { $0.refill(group) }
      self.performExits(refilled.exits)
      if refilled.again {
        self.scheduleRefill(of: group)
      }
    }
  }
}
