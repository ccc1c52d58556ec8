import Foundation

/// The bookkeeping for one unfinished task of a job. Lives from `track` until the task has been
/// routed, then is dropped with the task (bookkeeping is O(unfinished tasks)). Where the task is
/// in the job is its ``TaskState`` (below: a tracked task is its node and its state).
///
/// `job`, `typeEntry`, `operation`, `retry` and `timing` (the reference) never change after
/// publication (the job's `track` transition sets `typeEntry`, under its lock, before it; a task
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
  /// The entry of the task's type (its exact class, its "group"): `nil` only until the job's `track` transition, which
  /// looks it up under the job's lock (the node is made before that lock is taken, so
  /// allocating it adds nothing to the job's critical section). Exclusivity unchecked: never
  /// written after publication.
  @exclusivity(unchecked) private(set) var typeEntry: TaskTypeEntry!
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
  /// Set for a task tracked with a retry policy (by `trackAttempt`, when it makes the node).
  let retry: RetryAttempt?
  /// Set while events are listened to (before publication, in the job's `track` transition, or
  /// as it leaves the admission line): the task's start and finish are timed. `nil` for a task
  /// nobody observes, so events cost nothing when unused. Exclusivity unchecked: written once,
  /// under the job's lock, before the task can start.
  @exclusivity(unchecked) private(set) var timing: TaskTiming?
  /// Whether the task, tracked before the job started, keeps the job alive until it finished
  /// (`JobKeeper`). Only touched under the job's lock.
  private(set) var keepsJob = false
  /// The job claimed the task's queueing for its admission line (set under its lock): a job
  /// freed before it let the task go gives the claim back (`detach(from:)`).
  private(set) var claimedQueue = false

  /// A node for `task`, made with no lock held; the job's `track` transition gives it its
  /// type entry (`group` is for nodes that never go through it: the state machines' tests).
  init(job: __shared JobController, task: Operation, group: TaskTypeEntry? = nil, retry: RetryAttempt? = nil) {
    self.job = job
    self.retry = retry
    self.task = task
    self.operation = task
    self.typeEntry = group
  }

  /// Calls the completion closure given to `track`, if any. Returns `false` when there is none.
  func callCompletion(_ task: Operation) -> Bool { false }

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

  /// For an attempt of a task tracked with a retry policy.
  init(job: __shared JobController, task: Task, retry: RetryAttempt?, completion: @escaping @Sendable (Task) -> Void) {
    (self.completion, self.typedTask) = (completion, task)
    super.init(job: job, task: task, retry: retry)
  }

  override func callCompletion(_ task: Operation) -> Bool {
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
  func join(_ typeEntry: TaskTypeEntry) { self.typeEntry = typeEntry }

  /// The node no longer holds its task (routed, forgotten or abandoned). Returns the task, to
  /// release after the lock.
  func letGoOfTask() -> Operation? { exchange(&task, with: nil) }

  /// The task's start and finish are timed from now on (events are listened to).
  func time(with timing: TaskTiming) { self.timing = timing }

  /// The task, tracked before its job started, keeps the job alive (`JobKeeper`), or no longer.
  func keepJob(_ keeps: Bool) { keepsJob = keeps }

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
  @discardableResult
  func wait(for need: TaskState.Need, on queue: OperationQueue) -> Bool { state.wait(for: need, on: queue) }
  func stopWaiting(for need: TaskState.Need) -> OperationQueue? { state.stopWaiting(for: need) }
  func takeSlot() -> Bool { state.takeSlot() }
  func admitFromLine() -> OperationQueue? { state.admitFromLine() }
  /// The task is no longer tracked (routed, or dropped).
  func markRemoved() { state.remove() }
}
