import Foundation

/// The bookkeeping for one unfinished task of a job. Lives from `track` until the task has been
/// routed, then is dropped with the task (bookkeeping is O(unfinished tasks)).
///
/// `job`, `group`, `operation` and `extras` (the reference) never change after publication;
/// `task` and `isSignalled` are only touched under the job's lock, or by the job's single router
/// after the task was signalled.
class TrackedTask: OperationFinishObserver, OperationStartObserver, @unchecked Sendable {
  // @unchecked Sendable: mutable fields are guarded by the owning job's lock (see above).
  let job: JobController
  let group: TaskGroupEntry
  /// The tracked task until it has been routed; then `nil`, so the job no longer holds it.
  var task: Operation?
  /// The same task, never cleared; only read while the task is known to be alive (tracked, or
  /// finishing on the calling thread).
  unowned(unsafe) let operation: Operation
  var isSignalled = false
  /// Links of the job's list of unfinished tasks (see `TaskRegistry`), guarded by its lock. The
  /// list holds the nodes through `next`.
  var next: TrackedTask?
  unowned(unsafe) var previous: TrackedTask?
  var isRegistered = false
  /// Bookkeeping for the optional features (group limits, timeout, retry, events); `nil` for a
  /// plain tracked task, so those features cost nothing when unused. Set before publication (in
  /// `makeNode` or in the job's `track` transition), never replaced; its fields are guarded by
  /// the job's lock.
  var extras: TaskExtras?

  init(job: JobController, task: Operation, group: TaskGroupEntry) {
    self.job = job
    self.task = task
    self.operation = task
    self.group = group
  }

  /// The node's extras, created if missing. Only before the node is published (in the job's
  /// `track` transition), under the job's lock.
  func extrasForUpdate() -> TaskExtras {
    if let extras { return extras }
    let created = TaskExtras()
    extras = created
    return created
  }

  /// Calls the completion closure given to `track`, if any. Returns `false` when there is none.
  func deliverCompletion(_ task: Operation) -> Bool { false }

  var observingJob: ObjectIdentifier? { ObjectIdentifier(job) }

  func operationDidFinish(_ operation: ConcurrentOperation) {
    job.taskDidFinish(self)
  }

  func operationDidStart(_ operation: ConcurrentOperation) {
    job.taskDidStart(self)
  }
}

/// A tracked task with its own completion closure, typed to the task's class.
final class TrackedTaskWithCompletion<Task: Operation>: TrackedTask, @unchecked Sendable {
  // @unchecked Sendable: as for `TrackedTask`; `completion` is immutable and `@Sendable`.
  let completion: @Sendable (Task) -> Void

  init(job: JobController, task: Task, group: TaskGroupEntry, completion: @escaping @Sendable (Task) -> Void) {
    self.completion = completion
    super.init(job: job, task: task, group: group)
  }

  override func deliverCompletion(_ task: Operation) -> Bool {
    completion(unsafeDowncast(task, to: Task.self))
    return true
  }
}

/// The optional per-task state of limits, timeouts and retries. Guarded by the job's lock.
final class TaskExtras: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is guarded by the owning job's lock.
  /// The queue a task waiting for a group slot goes to once admitted.
  var pendingQueue: OperationQueue?
  /// Whether the task occupies one of its group's `limit` slots.
  var holdsSlot = false
  /// Whether a timeout is armed: set before it is scheduled, cleared when the task finishes, the
  /// job stops or the timeout fires.
  var timeoutArmed = false
  /// The armed timeout's timer, once scheduled; cancelled when the task finishes.
  var timeout: (any JobTimer)?
  /// The timeout expired while the task ran; it counts as failed with `JobKitError.timedOut`.
  var timedOut = false
  /// Set for a task tracked with a retry policy.
  let retry: RetryAttempt?
  /// Whether the task waits out a retry delay before its next attempt.
  var retryPending = false
  /// The timer of that delay, once scheduled.
  var retryTimer: (any JobTimer)?
  /// Events are listened to for this task: its start and finish are timed. Set before the node
  /// is published, never changed, so it may be read without the lock.
  var observesEvents = false
  /// For events: when the task was tracked, started (if observed) and finished.
  var trackedAt: ContinuousClock.Instant?
  var startedAt: ContinuousClock.Instant?
  var finishedAt: ContinuousClock.Instant?
  /// Its `taskFinished` event was emitted (exactly one per task; see `JobState.reportFinish`).
  var finishReported = false

  init(retry: RetryAttempt? = nil) {
    self.retry = retry
  }
}

/// One attempt of a retried task: its number, the policy, and how to track the next attempt in
/// its place.
final class RetryAttempt: Sendable {
  let number: Int
  let policy: RetryPolicy
  /// Makes and tracks attempt `number + 1`, replacing the given node.
  let trackNext: @Sendable (TrackedTask) -> Void

  init(number: Int, policy: RetryPolicy, trackNext: @escaping @Sendable (TrackedTask) -> Void) {
    self.number = number
    self.policy = policy
    self.trackNext = trackNext
  }
}
