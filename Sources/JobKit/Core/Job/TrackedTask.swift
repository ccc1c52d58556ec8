import Foundation

/// The bookkeeping for one unfinished task of a job. Lives from `track` until the task has been
/// routed, then is dropped with the task (bookkeeping is O(unfinished tasks)); a plain task's
/// node is held a little longer, task-less, by its fired completion-block hook, until the job
/// removes a batch of them from the hook table (at most ``CompletionBlockHook/retiredBatch`` per
/// job) or finishes.
///
/// `job`, `group`, `operation`, `retry` and `timing` (the reference) never change after
/// publication; `task` and `state` are only touched under the job's lock, or by the job's single
/// router after the task finished.
class TrackedTask: OperationFinishObserver, OperationStartObserver, @unchecked Sendable {
  // @unchecked Sendable: mutable fields are guarded by the owning job's lock (see above).
  let job: JobController
  let group: TaskGroupEntry
  /// The tracked task until it has been routed; then `nil`, so the job no longer holds it.
  /// Exclusivity unchecked: only touched under the job's lock or by its single router.
  @exclusivity(unchecked) var task: Operation?
  /// The same task, never cleared; only read while the task is known to be alive (tracked, or
  /// finishing on the calling thread).
  unowned(unsafe) let operation: Operation
  /// Where the task is in the job: unfinished (with its slot and timeout), waiting for a
  /// retry, finished, removed. Only touched under the job's lock (or by its drainer once the
  /// task finished), so the runtime's exclusivity check is redundant (three per task, ~250
  /// instructions, on the finished-task path).
  @exclusivity(unchecked) var state = TaskState.tracked
  /// Links of the job's list of unfinished tasks (see `TaskRegistry`), guarded by its lock. The
  /// list holds the nodes through `next`. Exclusivity unchecked: only touched under the lock.
  @exclusivity(unchecked) var next: TrackedTask?
  @exclusivity(unchecked) unowned(unsafe) var previous: TrackedTask?
  /// Set for a task tracked with a retry policy (before publication, in `makeNode`); exclusivity
  /// unchecked: never written after publication.
  @exclusivity(unchecked) var retry: RetryAttempt?
  /// Set while events are listened to (before publication, in the job's `track` transition):
  /// the task's start and finish are timed. `nil` for a task nobody observes, so events cost
  /// nothing when unused. Exclusivity unchecked: never written after publication.
  @exclusivity(unchecked) var timing: TaskTiming?

  init(job: JobController, task: Operation, group: TaskGroupEntry) {
    self.job = job
    self.task = task
    self.operation = task
    self.group = group
  }

  /// Calls the completion closure given to `track`, if any. Returns `false` when there is none.
  func deliverCompletion(_ task: Operation) -> Bool { false }

  var observingJob: ObjectIdentifier? { ObjectIdentifier(job) }

  func operationDidFinish(_ operation: ConcurrentOperation) {
    job.taskDidFinish(self)
  }

  func operationDidFinish(_ operation: ConcurrentOperation, error: (any Error)?) {
    job.taskDidFinish(self, error: .some(error))
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

/// When a task whose events are observed was tracked, started and finished, and whether its
/// `taskFinished` event went out (exactly one per task; see `JobState.reportFinish`). Guarded by
/// the job's lock.
final class TaskTiming: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is guarded by the owning job's lock.
  var trackedAt: ContinuousClock.Instant?
  var startedAt: ContinuousClock.Instant?
  var finishedAt: ContinuousClock.Instant?
  var finishReported = false
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
