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
/// queue (unbounded by default).
///
/// A group made with ``init(taking:maxRunning:taskQueue:)`` instead takes its tasks from a
/// sequence as it runs them, so it never holds more than `maxRunning` of them:
///
/// ```swift
/// let resize = ConcurrentGroup(taking: images.lazy.map { image in BlockTask { try shrink(image) } })
/// ```
///
/// The group finishes once every task finished and nothing more was added, so
/// `completionBlock`, dependents, `waitUntilFinished()`, ``JobController/run()`` and
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
/// task not started yet finishes without running its work. A sequence's tasks not taken yet are
/// never made. The group then finishes once, cancelled (``ConcurrentOperation/error`` is `nil`).
///
/// A task that cancels itself cancels the group (CompositeOperations' transaction): a task that
/// finished with `isCancelled` `true` and no error, which the group did not cancel (a
/// ``BlockTask`` or ``Work`` whose body threw `CancellationError` is one), is handled as a
/// `cancel(reason:)` of the group, with the task's ``ConcurrentOperation/cancellationReason``, on
/// the thread that finished it, so every other task is cancelled with that reason, even one that
/// would run until cancelled. The group's ``GroupJob/onCancelled`` handler is called once, right
/// before a cancelled group finishes; ``JobController/run()`` throws the reason
/// (`CancellationError` for a task cancelled plainly). ``GroupJob/propagatesTaskCancellation``
/// turns this off.
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
