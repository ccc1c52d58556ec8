import Foundation

/// A job that starts all its tasks at once and finishes when all of them finished. See
/// <doc:MigratingFromMGCommand> and <doc:MigratingFromCompositeOperations>.
///
/// ```swift
/// let downloads = ConcurrentGroup(urls.map { url in BlockTask { try fetch(url) } })
/// try await downloads.run()  // throws JobFailures if any download failed
/// ```
///
/// When the group starts it queues every task added so far; a task added while it runs is queued
/// at once. ``init(taking:maxRunning:taskQueue:)`` takes tasks from a sequence instead, holding at
/// most `maxRunning`. A failure does not stop the other tasks: the group finishes after all of
/// them, with ``JobFailures``. A cancel, or a task that cancels itself, cancels every task.
/// Order, failure, cancel, context and threads in full: <doc:GroupRules>.
open class ConcurrentGroup: GroupJob, @unchecked Sendable {
  // @unchecked Sendable: adds no state to GroupJob's lock-protected state.

  /// Creates a group that will start `tasks`, and any tasks added later, together, on a
  /// concurrent ``JobController/taskQueue`` the group owns (or on
  /// ``JobController/defaultTaskQueue``, if set).
  public init(_ tasks: [Operation] = []) {
    super.init(sequential: false, tasks: tasks, taskQueue: nil, propagatesTaskCancellation: true)
  }

  /// Creates a group that will start `tasks`, and any tasks added later, together, on
  /// `taskQueue` (for example a serial queue, or one shared with other jobs).
  public init(_ tasks: [Operation] = [], taskQueue: OperationQueue) {
    super.init(sequential: false, tasks: tasks, taskQueue: taskQueue, propagatesTaskCancellation: true)
  }

  /// The `maxRunning` of ``init(taking:maxRunning:taskQueue:)`` unless given: twice the active
  /// processor count, enough to keep every core busy with short tasks while a finished task's
  /// successor is being made and queued.
  public static let defaultMaxRunning = 2 * ProcessInfo.processInfo.activeProcessorCount

  /// Creates a group that takes its tasks from `tasks` as it runs them: when it starts, it takes
  /// tasks until `maxRunning` of them run, then one more each time one of them finished (and was
  /// routed). Tasks added with ``GroupJob/add(_:)`` run alongside, uncounted. The group finishes
  /// once the sequence is exhausted and every task finished. A cancel stops the taking: the
  /// tasks the sequence did not make yet are never made.
  ///
  /// The sequence is sent to the group (the caller keeps no access to it) and released once
  /// exhausted or when the group finished. Its iterator is called only by the group's job
  /// callbacks (`main()` and each task's completion): serially, on different threads. A task
  /// made while it is still in the group is reported as ``JobKitError/Code/taskAlreadyTracked``
  /// and skipped; a `maxRunning` below 1 is reported as ``JobKitError/Code/invalidLimit`` when
  /// the group starts, and 1 is used. The tasks run on `taskQueue`, or if `nil` on a concurrent
  /// queue the group owns (or ``JobController/defaultTaskQueue``, if set).
  @inlinable
  public init<Tasks: Sequence>(
    taking tasks: sending Tasks, maxRunning: Int = ConcurrentGroup.defaultMaxRunning, taskQueue: OperationQueue? = nil
  ) where Tasks.Element: Operation {
    let iterator = TaskIterator(tasks.makeIterator())
    super.init(
      sequential: false, tasks: [], taskQueue: taskQueue, taking: { iterator.next() }, maxRunning: maxRunning,
      propagatesTaskCancellation: true)
  }
}
