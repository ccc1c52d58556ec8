import Foundation

/// Where one tracked task is in its job, as one value: each case carries only what is valid in
/// it, so a finished task holding a slot, an armed timeout on a task waiting for its retry, or a
/// routed task still counted as unfinished cannot be expressed.
///
/// ```
/// unfinished(slot, timeout) ──finish──────────────▶ finished(timedOut) ──routed──▶ removed
///        │                                              ▲
///        └─retry──▶ awaitingRetry(timer) ──stop─────────┘
///                          └──delay ends──▶ retrying ──next attempt tracked──▶ removed
/// ```
///
/// A job-queued task's `slot` goes `none` → `holding` (a limited group's free slot), or through
/// `admission(queue)` (its job's admission line, then `none` once admitted), `waiting(queue)`
/// (its group's line) or `suspended(queue)` (held back while its job is suspended, then `none`
/// again at the resume), before it is queued.
///
/// Only changed under the job's lock (or by the router once the task finished). Transitions
/// return what the caller must do after releasing it; none calls anything.
enum TaskState {
  /// Tracked, its finish not observed yet.
  case unfinished(slot: Slot, timeout: Timeout)
  /// An attempt of a retried task failed; the next attempt starts after `timer`'s delay (`nil`
  /// until the timer was scheduled). `timedOut`: the failed attempt ran past its timeout.
  case awaitingRetry(timer: TimerBox?, timedOut: Bool)
  /// The retry delay ended: the next attempt is being tracked in this one's place.
  case retrying
  /// Its finish was observed (or a stop ended its retry delay): it waits to be routed. `report`:
  /// what the finishing thread read from the task for routing it, with no lock held (`nil` if
  /// the router must read it).
  case finished(timedOut: Bool, report: FinishReport?)
  /// Routed, or dropped without routing (a duplicate, a replaced attempt): no longer tracked.
  case removed

  static let tracked = TaskState.unfinished(slot: .none, timeout: .none)

  /// A task's place under its group's limit (``JobController/setMaxConcurrentTasks(_:forGroup:)``)
  /// and its job's suspension (``ConcurrentOperation/suspend()``): what stands between a
  /// job-queued task and its queue.
  enum Slot {
    /// Its group has no limit, or the caller queues it itself.
    case none
    /// Held back by its job's suspension (in `JobSuspension.waiting`); once the job is resumed
    /// (or stopped) it asks its group for a slot, as if tracked then, and goes to `queue`.
    case suspended(OperationQueue)
    /// In its group's line; goes to `queue` once admitted.
    case waiting(OperationQueue)
    /// In its job's admission line (`JobAdmission`); asks for a slot once admitted.
    case admission(OperationQueue)
    /// Holds one of its group's slots until it finishes (or its attempt fails and waits).
    case holding
  }

  /// A timeout armed for the task's current attempt.
  enum Timeout {
    case none
    /// Armed: the timer is `nil` until it was scheduled on the job's clock.
    case armed(TimerBox?)
    /// It expired while the task ran: the task was cancelled and counts as failed.
    case expired
  }

  /// Whether the job still tracks the task (it has not been routed or dropped).
  var isRegistered: Bool {
    if case .removed = self { return false }
    return true
  }

  /// Whether its finish was observed and it waits to be routed.
  var isFinished: Bool {
    if case .finished = self { return true }
    return false
  }

  /// Whether the job still waits for the task (or its current attempt) to finish.
  var isUnfinished: Bool {
    if case .unfinished = self { return true }
    return false
  }

  /// Whether the task, or its failed attempt, ran past its timeout.
  var timedOut: Bool {
    switch self {
    case .unfinished(_, .expired), .awaitingRetry(_, timedOut: true), .finished(timedOut: true, _): return true
    case .unfinished, .awaitingRetry, .retrying, .finished, .removed: return false
    }
  }

  /// What a task gave back when it stopped running: its slot and its timeout's timer.
  struct Release {
    /// It held a slot of its group: the caller gives the slot to the next waiting task.
    var slot = false
    /// Its armed timeout's timer, to cancel.
    var box: TimerBox?
    /// It was still waiting in its group's line (someone else queued it: misuse): the caller
    /// takes it out of the line, so that the line never holds a routed node's last reference.
    var leftLine = false
    /// The line it was in is its job's admission line (`leftLine` is set too).
    var leftAdmission = false

    var timer: (any JobTimer)? { box?.timer }

    init(slot: Bool = false, timer box: TimerBox? = nil, leftLine: Bool = false) {
      self.slot = slot
      self.box = box
      self.leftLine = leftLine
    }

    init(_ slot: Slot, _ timeout: Timeout) {
      self.init(slot: slot.holdsSlot, timer: timeout.timer, leftLine: slot.isWaiting)
      if case .admission = slot {
        leftLine = true
        leftAdmission = true
      }
    }
  }

  /// The task finished (`report`: what its finishing thread read from it). Returns what it gave
  /// back, or `nil` if its finish was observed already (a second report of one finish changes
  /// nothing).
  mutating func finish(report: FinishReport? = nil) -> Release? {
    guard case .unfinished(let slot, let timeout) = self else { return nil }
    self = .finished(timedOut: timeout.expired, report: report)
    return Release(slot, timeout)
  }

  /// The task's attempt failed and will be retried. Returns what it gave back, or `nil` if it is
  /// not unfinished.
  mutating func beginRetry() -> Release? {
    guard case .unfinished(let slot, let timeout) = self else { return nil }
    self = .awaitingRetry(timer: nil, timedOut: timeout.expired)
    return Release(slot, timeout)
  }

  /// The retry delay's timer was scheduled. Returns `false` if the delay no longer runs (a stop
  /// routed the failed attempt): the caller cancels the timer.
  mutating func retryScheduled(_ timer: any JobTimer) -> Bool {
    guard case .awaitingRetry(nil, let timedOut) = self else { return false }
    self = .awaitingRetry(timer: TimerBox(timer), timedOut: timedOut)
    return true
  }

  /// The retry delay ended. Returns `nil` if the caller must not track the next attempt (a stop
  /// routed the failed attempt), else what the delay gave back: its timer, released by the
  /// caller after the lock.
  mutating func claimRetry() -> Release? {
    guard case .awaitingRetry(let timer, _) = self else { return nil }
    self = .retrying
    return Release(timer: timer)
  }

  /// A timeout is about to be scheduled. Returns `false` if it is not needed: the task is not
  /// unfinished (it finished, or its attempt waits for a retry), or one is armed already.
  mutating func armTimeout() -> Bool {
    guard case .unfinished(let slot, .none) = self else { return false }
    self = .unfinished(slot: slot, timeout: .armed(nil))
    return true
  }

  /// The timeout's timer was scheduled. Returns `false` if it is no longer needed (the task
  /// finished, or the timeout was disarmed or fired): the caller cancels it.
  mutating func timeoutScheduled(_ timer: any JobTimer) -> Bool {
    guard case .unfinished(let slot, .armed(nil)) = self else { return false }
    self = .unfinished(slot: slot, timeout: .armed(TimerBox(timer)))
    return true
  }

  /// Whether a timeout is armed for the unfinished task.
  var isTimeoutArmed: Bool {
    if case .unfinished(_, .armed) = self { return true }
    return false
  }

  /// The timeout expired while the task was unfinished. Returns `nil` if it finished, or the
  /// timeout was disarmed, meanwhile; else the caller cancels the task, and releases the
  /// returned timer after the lock.
  mutating func timeoutExpired() -> Release? {
    guard case .unfinished(let slot, .armed(let timer)) = self else { return nil }
    self = .unfinished(slot: slot, timeout: .expired)
    return Release(timer: timer)
  }

  enum StopOutcome {
    /// The task still runs: cancel it (and its armed timeout's timer, if any).
    case cancel(timer: TimerBox?)
    /// Its attempt waited for a retry: it is now finished, as its task's last attempt; cancel
    /// the delay's timer, if any, and route it.
    case finishedRetry(timer: TimerBox?)
    /// Nothing to do: it finished (or is being replaced by its next attempt).
    case none
  }

  /// The job stops: an unfinished task's timeout is disarmed, a pending retry ends.
  mutating func stop() -> StopOutcome {
    switch self {
    case .unfinished(let slot, let timeout):
      if case .armed(let timer) = timeout {
        self = .unfinished(slot: slot, timeout: .none)
        return .cancel(timer: timer)
      }
      return .cancel(timer: nil)
    case .awaitingRetry(let timer, let timedOut):
      self = .finished(timedOut: timedOut, report: nil)
      return .finishedRetry(timer: timer)
    case .retrying, .finished, .removed:
      return .none
    }
  }

  /// The task waits in its group's line, to go to `queue` once admitted. Only for an
  /// unfinished task without a slot.
  mutating func waitForSlot(on queue: OperationQueue) {
    guard case .unfinished(.none, let timeout) = self else { return }
    self = .unfinished(slot: .waiting(queue), timeout: timeout)
  }

  /// The unfinished task, not in line, takes a free slot of its group at once. Returns `false`
  /// (and takes nothing) otherwise.
  mutating func takeSlot() -> Bool {
    guard case .unfinished(.none, let timeout) = self else { return false }
    self = .unfinished(slot: .holding, timeout: timeout)
    return true
  }

  /// The task is held back by its job's suspension, to go to `queue` once let go. Only for an
  /// unfinished task without a slot; returns `false` (and changes nothing) otherwise.
  mutating func waitForResume(on queue: OperationQueue) -> Bool {
    guard case .unfinished(.none, let timeout) = self else { return false }
    self = .unfinished(slot: .suspended(queue), timeout: timeout)
    return true
  }

  /// The suspension that held the task back ended. Returns the queue it goes to (the caller
  /// asks its group for a slot first), or `nil` if it is no longer held back (it finished, or
  /// was dropped, meanwhile).
  mutating func endWaitForResume() -> OperationQueue? {
    guard case .unfinished(.suspended(let queue), let timeout) = self else { return nil }
    self = .unfinished(slot: .none, timeout: timeout)
    return queue
  }

  /// The task waiting in its group's line gets a slot. Returns the queue it goes to, or `nil`
  /// (and takes nothing) if it no longer waits.
  mutating func admitFromLine() -> OperationQueue? {
    guard case .unfinished(.waiting(let queue), let timeout) = self else { return nil }
    self = .unfinished(slot: .holding, timeout: timeout)
    return queue
  }

  /// The task is no longer tracked (routed, or dropped).
  mutating func remove() {
    self = .removed
  }
}

extension TaskState.Slot {
  var holdsSlot: Bool {
    if case .holding = self { return true }
    return false
  }

  var isWaiting: Bool {
    if case .waiting = self { return true }
    return false
  }
}

extension TaskState.Timeout {
  var expired: Bool {
    if case .expired = self { return true }
    return false
  }

  var timer: TimerBox? {
    if case .armed(let timer) = self { return timer }
    return nil
  }
}
