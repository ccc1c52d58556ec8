import Foundation

/// The bookkeeping for one unfinished task of a job. Lives from `track` until the task has been
/// routed, then is dropped with the task (bookkeeping is O(unfinished tasks)).
///
/// `job`, `group`, `operation` and `previousCompletionBlock` never change after publication;
/// `task` and `isSignalled` are only
/// touched under the job's lock, or by the job's single router after the task was signalled.
class TrackedTask: OperationFinishObserver, @unchecked Sendable {
  // @unchecked Sendable: mutable fields are guarded by the owning job's lock (see above).
  let job: JobController
  let group: TaskGroupEntry
  /// The tracked task until it has been routed; then `nil`, so the job no longer holds it.
  var task: Operation?
  /// The same task, never cleared: read by the wrapping `completionBlock`, which only runs while
  /// Foundation holds the task.
  unowned(unsafe) let operation: Operation
  var isSignalled = false
  /// For tasks that are not `ConcurrentOperation`s: the `completionBlock` the task had before the
  /// job wrapped it, called first and put back once the task finished. Set before the node is
  /// published, never changed.
  private(set) var previousCompletionBlock: (@Sendable () -> Void)?

  init(job: JobController, task: Operation, group: TaskGroupEntry) {
    self.job = job
    self.task = task
    self.operation = task
    self.group = group
    if !(task is ConcurrentOperation) {
      previousCompletionBlock = task.completionBlock
    }
  }

  /// Calls the completion closure given to `track`, if any. Returns `false` when there is none.
  func deliverCompletion(_ task: Operation) -> Bool { false }

  func operationDidFinish(_ operation: ConcurrentOperation) {
    job.taskDidFinish(self)
  }

  /// The wrapping `completionBlock` of a plain `Operation` task ran (once, after it finished):
  /// put the task's own block back first (so two jobs tracking one task unwind in order), run
  /// it, and signal the job (a second signal is ignored).
  func completionBlockDidRun() {
    operation.completionBlock = previousCompletionBlock
    previousCompletionBlock?()
    job.taskDidFinish(self)
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

/// The tasks of one dynamic type ("group") in a job: how many are unfinished and the group's own
/// completion handler. Only touched under the job's lock.
final class TaskGroupEntry: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is guarded by the owning job's lock.
  let type: Operation.Type
  var unfinished = 0
  var handler: (@Sendable () -> Void)?

  init(type: Operation.Type) {
    self.type = type
  }
}
