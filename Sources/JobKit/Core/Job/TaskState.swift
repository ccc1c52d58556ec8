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
/// a `waitingFor…(queue)` case (in its job's admission, `JobAdmission`: for its turn, the resume,
/// a slot or its dependencies, then `none` or `holding`) before it is queued.
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
    // Waits in its job's admission (`JobAdmission`) for one need, to go to `queue` once nothing
    // else stands in its way (it asks for the next need as it leaves): one case per need, so
    // that a slot stays one word (`waiting` and `waiting(_:for:)` read and make them as one).
    case waitingForTurn(OperationQueue)
    case waitingForResume(OperationQueue)
    case waitingForSlot(OperationQueue)
    case waitingForDependencies(OperationQueue)
    /// Holds one of its group's slots until it finishes (or its attempt fails and waits).
    case holding
  }

  /// What a waiting task waits for, asked in this order as it goes: one at a time, because each
  /// may change while it waits (a resume, a limit set, a rate dropped by a stop).
  enum Need: UInt8 {
    /// Its turn in its job's admission line (a group admits it: open, not paused, its turn).
    case turn
    /// Its job's resume (the job is suspended).
    case resume
    /// A slot of its task type's limit, and a token of its rate limit.
    case slot
    /// Its dependencies, routed (`trackAndQueue(_:after:completion:)`; a task its caller
    /// queues, held by a gate, is not in this state).
    case dependencies
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
    /// It was still waiting for its turn or a slot (someone else queued it: misuse): the caller
    /// takes it out of that line, so that the line never holds a routed node's last reference.
    /// (One waiting for the resume or its dependencies stays listed: the resume, or its routing,
    /// drops it, and releases it after the lock.)
    var leftLine: Need?

    var timer: (any JobTimer)? { box?.timer }

    init(slot: Bool = false, timer box: TimerBox? = nil, leftLine: Need? = nil) {
      self.slot = slot
      self.box = box
      self.leftLine = leftLine
    }

    init(_ slot: Slot, _ timeout: Timeout) {
      self.init(slot: slot.holdsSlot, timer: timeout.timer, leftLine: slot.leftLine)
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

  /// The unfinished task, without a slot, waits for `need`, to go to `queue` then. Returns
  /// `false` (and changes nothing) otherwise.
  @discardableResult
  mutating func wait(for need: Need, on queue: OperationQueue) -> Bool {
    guard case .unfinished(.none, let timeout) = self else { return false }
    self = .unfinished(slot: .waiting(queue, for: need), timeout: timeout)
    return true
  }

  /// The task, waiting for `need`, waits no more. Returns the queue it goes to, or `nil` (and
  /// changes nothing) if it no longer waits for `need` (it finished, or was dropped, meanwhile).
  mutating func stopWaiting(for need: Need) -> OperationQueue? {
    guard case .unfinished(let slot, let timeout) = self else { return nil }
    let queue: OperationQueue
    switch (slot, need) {
    case (.waitingForTurn(let target), .turn), (.waitingForResume(let target), .resume),
      (.waitingForSlot(let target), .slot), (.waitingForDependencies(let target), .dependencies):
      queue = target
    default:
      return nil
    }
    self = .unfinished(slot: .none, timeout: timeout)
    return queue
  }

  /// The unfinished task, not waiting, takes a free slot of its group at once. Returns `false`
  /// (and takes nothing) otherwise.
  mutating func takeSlot() -> Bool {
    guard case .unfinished(.none, let timeout) = self else { return false }
    self = .unfinished(slot: .holding, timeout: timeout)
    return true
  }

  /// The task waiting for a slot gets one. Returns the queue it goes to, or `nil` (and takes
  /// nothing) if it no longer waits for one.
  mutating func admitFromLine() -> OperationQueue? {
    guard case .unfinished(.waitingForSlot(let queue), let timeout) = self else { return nil }
    self = .unfinished(slot: .holding, timeout: timeout)
    return queue
  }

  /// Whether the unfinished task waits for `need`.
  func waits(for need: Need) -> Bool {
    switch (self, need) {
    case (.unfinished(.waitingForTurn, _), .turn), (.unfinished(.waitingForResume, _), .resume),
      (.unfinished(.waitingForSlot, _), .slot), (.unfinished(.waitingForDependencies, _), .dependencies):
      return true
    default:
      return false
    }
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

  /// A task waiting for `need`, to go to `queue` then.
  static func waiting(_ queue: OperationQueue, for need: TaskState.Need) -> Self {
    switch need {
    case .turn: .waitingForTurn(queue)
    case .resume: .waitingForResume(queue)
    case .slot: .waitingForSlot(queue)
    case .dependencies: .waitingForDependencies(queue)
    }
  }

  /// What the task waits for, and the queue it goes to then; `nil` if it does not wait.
  var waiting: (queue: OperationQueue, need: TaskState.Need)? {
    switch self {
    case .waitingForTurn(let queue): (queue, .turn)
    case .waitingForResume(let queue): (queue, .resume)
    case .waitingForSlot(let queue): (queue, .slot)
    case .waitingForDependencies(let queue): (queue, .dependencies)
    case .none, .holding: nil
    }
  }

  /// The line a finished task leaves (see `Release.leftLine`).
  var leftLine: TaskState.Need? {
    switch self {
    case .waitingForTurn: .turn
    case .waitingForSlot: .slot
    case .none, .holding, .waitingForResume, .waitingForDependencies: nil
    }
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
