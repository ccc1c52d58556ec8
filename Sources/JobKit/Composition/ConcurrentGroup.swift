import Foundation

/// A job that starts all its tasks at once and finishes when all of them finished. See
/// <doc:MigratingFromMGCommand> and <doc:MigratingFromCompositeOperations>.
///
/// ```swift
/// let downloads = ConcurrentGroup(urls.map { url in BlockTask { try fetch(url) } })
/// try await downloads.run()  // throws JobFailures if any download failed
/// ```
///
/// ### Order
/// When the group starts, it adds every task added so far to ``JobController/taskQueue``; a task
/// added while the group runs is queued at once. How many run at the same time is up to the
/// queue (unbounded by default). The group finishes once every task finished and nothing more was
/// added, so `completionBlock`, dependents, `waitUntilFinished()`, ``JobController/run()`` and
/// ``ConcurrentOperation/runAndWait()`` see the whole tree done. Groups nest to any depth.
///
/// ### Failure
/// A task fails when it finishes with an ``ConcurrentOperation/error``. A failure does not stop
/// the other tasks: the group finishes after all of them, with a ``JobFailures`` error listing
/// every failure in the order the tasks finished; the list is also ``JobController/failures``,
/// readable from any thread. (The group sets ``JobController/failurePolicy`` to
/// ``FailurePolicy/collect``.)
///
/// ### Cancel
/// `cancel()` (or cancelling a parent group, or the Swift task awaiting ``JobController/run()``)
/// cancels every task: a cancellable one stops, any other runs to its end and is waited for, and a
/// task not started yet finishes without running its work. The group then finishes once,
/// cancelled (``ConcurrentOperation/error`` is `nil`).
///
/// ### Context and threads
/// As for ``SequentialGroup``: each task that adopts ``ContextConsuming`` gets ``GroupJob/context`` right
/// before it is queued, nested groups share it, and the group's bookkeeping runs serially with
/// its other job callbacks, on the thread that finished a task.
open class ConcurrentGroup: GroupJob, @unchecked Sendable {
  // @unchecked Sendable: adds no state to GroupJob's lock-protected state.

  /// Creates a group that will start `tasks`, and any tasks added later, together, on a
  /// concurrent ``JobController/taskQueue`` the group owns (or on
  /// ``JobController/defaultTaskQueue``, if set).
  public init(_ tasks: [Operation] = []) {
    super.init(mode: .concurrent, tasks: tasks, taskQueue: nil)
  }

  /// Creates a group that will start `tasks`, and any tasks added later, together, on
  /// `taskQueue` (for example a serial queue, or one shared with other jobs).
  public init(_ tasks: [Operation] = [], taskQueue: OperationQueue) {
    super.init(mode: .concurrent, tasks: tasks, taskQueue: taskQueue)
  }
}
