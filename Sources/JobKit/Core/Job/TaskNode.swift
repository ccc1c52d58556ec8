import Foundation

/// The bookkeeping for one unfinished task of a job. Lives from `track` until the task has been
/// routed, then is dropped with the task (bookkeeping is O(unfinished tasks)). Where the task is
/// in the job is its ``TaskState`` (below: a tracked task is its node and its state).
///
/// `job`, `group`, `operation`, `retry` and `timing` (the reference) never change after
/// publication (the job's `track` transition sets `group`, under its lock, before it; a task
/// waiting for admission gets `timing` under the lock as it leaves the line, before it can
/// start); `task` and `state` are only touched under the job's lock, or by the job's single
/// router after the task finished.
///
/// Usable from inlinable code, so that a client's `trackAndQueue(_:completion:)` makes its
/// ``TaskNodeWithCompletion`` specialized, whose metadata is then cached in the client
/// instead of looked up in the runtime's generic metadata cache for every task.
@usableFromInline
class TaskNode: OperationFinishObserver, OperationStartObserver, @unchecked Sendable {
  // @unchecked Sendable: mutable fields are guarded by the owning job's lock (see above).
  /// Not retained: the job holds its nodes, and keeps itself alive while a task may call it
  /// (`JobKeeper`), so a job dropped before its start is freed with the tasks waiting for it.
  unowned(unsafe) let job: JobController
  /// The task's group (its exact class): `nil` only until the job's `track` transition, which
  /// looks it up under the job's lock (the node is made before that lock is taken, so
  /// allocating it adds nothing to the job's critical section). Exclusivity unchecked: never
  /// written after publication.
  @exclusivity(unchecked) private(set) var group: TaskTypeEntry!
  /// The tracked task until it has been routed; then `nil`, so the job no longer holds it.
  /// Exclusivity unchecked: only touched under the job's lock or by its single router.
  @exclusivity(unchecked) private(set) var task: Operation?
  /// The same task, never cleared; only read while the task is known to be alive (tracked, or
  /// finishing on the calling thread).
  unowned(unsafe) let operation: Operation
  /// Where the task is in the job: unfinished (with its slot and timeout), waiting for a
  /// retry, finished, removed. Only touched under the job's lock (or by its drainer once the
  /// task finished), so the runtime's exclusivity check is redundant (three per task on the
  /// finished-task path).
  @exclusivity(unchecked) private(set) var state = TaskState.tracked
  /// Links of the job's list of unfinished tasks (see `TaskRegistry`), guarded by its lock. The
  /// list holds the nodes through `next`. Exclusivity unchecked: only touched under the lock.
  @exclusivity(unchecked) private(set) var next: TaskNode?
  @exclusivity(unchecked) unowned(unsafe) private(set) var previous: TaskNode?
  /// Set for a task tracked with a retry policy (before publication, by `trackAttempt`); exclusivity
  /// unchecked: never written after publication.
  @exclusivity(unchecked) private(set) var retry: RetryAttempt?
  /// Set while events are listened to (before publication, in the job's `track` transition, or
  /// as it leaves the admission line): the task's start and finish are timed. `nil` for a task
  /// nobody observes, so events cost nothing when unused. Exclusivity unchecked: written once,
  /// under the job's lock, before the task can start.
  @exclusivity(unchecked) private(set) var timing: TaskTiming?
  /// Whether the task, tracked before the job started, holds the job alive until it finished
  /// (`JobKeeper`). Only touched under the job's lock.
  private(set) var holdsJob = false
  /// The job claimed the task's queueing for its admission line (set under its lock): a job
  /// freed before it let the task go gives the claim back (`detach(from:)`).
  private(set) var claimedQueue = false

  /// A node for `task`, made with no lock held; the job's `track` transition gives it its
  /// group (`group` is for nodes that never go through it: the state machines' tests).
  init(job: __shared JobController, task: Operation, group: TaskTypeEntry? = nil) {
    self.job = job
    self.task = task
    self.operation = task
    self.group = group
  }

  /// Calls the completion closure given to `track`, if any. Returns `false` when there is none.
  func deliverCompletion(_ task: Operation) -> Bool { false }

  var observingJob: ObjectIdentifier? { ObjectIdentifier(job) }

  func operationDidFinish(_ operation: ConcurrentOperation) {
    signalFinish()
  }

  func operationDidFinish(_ operation: ConcurrentOperation, error: (any Error)?) {
    signalFinish(error: .some(error))
  }

  /// Tells the job that the task finished, holding a strong reference to the job for the call:
  /// the job may let go of itself in it (`JobKeeper`).
  func signalFinish(error: (any Error)?? = nil) {
    let job: JobController = job
    withExtendedLifetime(job) { job.taskDidFinish(self, error: error) }
  }

  func operationDidStart(_ operation: ConcurrentOperation) {
    job.taskDidStart(self)
  }

  /// The job is freed unfinished (its `deinit`, after its lock; `task`: this node's, abandoned):
  /// the node stops observing `task`, so no observer with the freed job stays behind (a finish
  /// would call it, a later job compare against it), and gives back its job's unused claim.
  func detach(from task: Operation) {
    if let operation = task as? ConcurrentOperation {
      operation.detach(self, releasingClaim: claimedQueue)
    } else {
      CompletionBlockHook.detach(self, from: task, releasingClaim: claimedQueue)
    }
  }
}

/// A tracked task with its own completion closure, typed to the task's class.
@usableFromInline
final class TaskNodeWithCompletion<Task: Operation>: TaskNode, @unchecked Sendable {
  // @unchecked Sendable: as for `TaskNode`; `completion` is immutable and `@Sendable`.
  let completion: @Sendable (Task) -> Void
  /// `operation`, typed (unowned as it is): the routed task is always this one, so no cast.
  unowned(unsafe) let typedTask: Task

  @usableFromInline
  init(job: __shared JobController, task: Task, completion: @escaping @Sendable (Task) -> Void) {
    (self.completion, self.typedTask) = (completion, task)
    super.init(job: job, task: task)
  }

  override func deliverCompletion(_ task: Operation) -> Bool {
    completion(typedTask)
    return true
  }
}

// MARK: - The node's transitions

/// The only writers of a node's fields, each called under its job's lock (or by the job's one
/// router once the task finished): the job's transitions change a node through these, never by
/// assigning its fields. Those of ``TaskState`` are applied to the node's `state` as they are.
extension TaskNode {
  /// The job's `track` transition looked up the task's group.
  func join(_ group: TaskTypeEntry) { self.group = group }

  /// The node no longer holds its task (routed, forgotten or abandoned). Returns the task, to
  /// release after the lock.
  func letGoOfTask() -> Operation? { exchange(&task, with: nil) }

  /// The task's start and finish are timed from now on (events are listened to).
  func time(with timing: TaskTiming) { self.timing = timing }

  /// The task is an attempt of a task tracked with a retry policy (before publication).
  func attempt(_ attempt: RetryAttempt?) { retry = attempt }

  /// The task, tracked before its job started, holds the job alive (`JobKeeper`), or no longer.
  func holdJob(_ holds: Bool) { holdsJob = holds }

  /// The job claimed the task's queueing for its admission line.
  func claimQueueForAdmission() { claimedQueue = true }

  /// Links the node in front of `head` in its job's list of unfinished tasks (`TaskRegistry`).
  func link(before head: TaskNode?) {
    next = head
    head?.previous = self
  }

  /// Unlinks the node from its job's list, whose first node is `head`.
  func unlink(from head: inout TaskNode?) {
    if let previous {
      previous.next = next
    } else {
      head = next
    }
    next?.previous = previous
    next = nil
    previous = nil
  }

  func finish(report: FinishReport? = nil) -> TaskState.Release? { state.finish(report: report) }
  func beginRetry() -> TaskState.Release? { state.beginRetry() }
  func retryScheduled(_ timer: any JobTimer) -> Bool { state.retryScheduled(timer) }
  func claimRetry() -> TaskState.Release? { state.claimRetry() }
  func armTimeout() -> Bool { state.armTimeout() }
  func timeoutScheduled(_ timer: any JobTimer) -> Bool { state.timeoutScheduled(timer) }
  func timeoutExpired() -> TaskState.Release? { state.timeoutExpired() }
  func stop() -> TaskState.StopOutcome { state.stop() }
  func waitForSlot(on queue: OperationQueue) { state.waitForSlot(on: queue) }
  func takeSlot() -> Bool { state.takeSlot() }
  func holdForResume(on queue: OperationQueue) -> Bool { state.holdForResume(on: queue) }
  func endHold() -> OperationQueue? { state.endHold() }
  func admitFromLine() -> OperationQueue? { state.admitFromLine() }
  func waitForAdmission(on queue: OperationQueue) { state.waitForAdmission(on: queue) }
  func leaveAdmission() -> OperationQueue? { state.leaveAdmission() }
  /// The task is no longer tracked (routed, or dropped).
  func markRemoved() { state.remove() }
}

// MARK: - A tracked task's state

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
      self.init(slot: slot.isHolding, timer: timeout.timer, leftLine: slot.isWaiting)
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
  mutating func holdForResume(on queue: OperationQueue) -> Bool {
    guard case .unfinished(.none, let timeout) = self else { return false }
    self = .unfinished(slot: .suspended(queue), timeout: timeout)
    return true
  }

  /// The suspension that held the task back ended. Returns the queue it goes to (the caller
  /// asks its group for a slot first), or `nil` if it is no longer held back (it finished, or
  /// was dropped, meanwhile).
  mutating func endHold() -> OperationQueue? {
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
  var isHolding: Bool {
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
