import Foundation

/// A job that runs its tasks one after another, in the order they were added. See
/// <doc:MigratingFromMGCommand> and <doc:MigratingFromCompositeOperations>.
///
/// ```swift
/// let script = SequentialGroup([
///     BlockTask { print("a") },
///     ConcurrentGroup([BlockTask { print("b") }, BlockTask { print("c") }]),
///     BlockTask { print("d") },  // after both b and c
/// ])
/// try await script.run()
/// ```
///
/// Each task is queued only after the one before it finished and was routed, and the group
/// finishes once the last one did. By default a failure does not stop the others, and the group
/// finishes with ``JobFailures``; with ``stopsOnFailure`` the first failure ends it. A cancel, or a
/// task that cancels itself, cancels the group: the tasks not started yet finish without running.
/// Order, failure, cancel, context and threads in full: <doc:GroupRules>.
open class SequentialGroup: GroupJob, @unchecked Sendable {
  // @unchecked Sendable: adds no state to GroupJob's lock-protected state.

  /// Creates a group that will run `tasks` in order, then any tasks added later, on a
  /// concurrent ``JobController/taskQueue`` the group owns (or on
  /// ``JobController/defaultTaskQueue``, if set).
  public init(_ tasks: [Operation] = []) {
    super.init(sequential: true, tasks: tasks, taskQueue: nil, propagatesTaskCancellation: true)
  }

  /// Creates a group that will run `tasks` in order, then any tasks added later, on
  /// `taskQueue` (for example a serial queue, or one shared with other jobs).
  public init(_ tasks: [Operation] = [], taskQueue: OperationQueue) {
    super.init(sequential: true, tasks: tasks, taskQueue: taskQueue, propagatesTaskCancellation: true)
  }

  /// Creates a group that takes its tasks from `tasks` one at a time: the next only after the
  /// one before it finished (and was routed), so it holds one task at a time. Tasks added with
  /// ``GroupJob/add(_:)`` run after the sequence is exhausted. A cancel, or a stop on failure,
  /// stops the taking: the tasks the sequence did not make yet are never made.
  ///
  /// The sequence is sent to the group (the caller keeps no access to it) and released once
  /// exhausted or when the group finished. Its iterator is called only by the group's job
  /// callbacks (`main()` and each task's completion): serially, on different threads. A task
  /// made while it is still in the group is reported as ``JobKitError/Code/taskAlreadyTracked``
  /// and skipped. The tasks run on `taskQueue`, or if `nil` on a concurrent queue the group owns
  /// (or ``JobController/defaultTaskQueue``, if set).
  @inlinable
  public init<Tasks: Sequence>(taking tasks: sending Tasks, taskQueue: OperationQueue? = nil)
  where Tasks.Element: Operation {
    let iterator = TaskIterator(tasks.makeIterator())
    super.init(
      sequential: true, tasks: [], taskQueue: taskQueue, taking: { iterator.next() }, propagatesTaskCancellation: true)
  }

  /// Whether the first failed task ends the group, which then finishes with that task's error.
  /// Default `false`: the group runs every task and finishes with ``JobFailures``. Set it before the group runs; safe from any thread.
  public var stopsOnFailure: Bool {
    get { withGroupState { $0.stopsOnFailure } }
    set { withGroupState { $0.setStopsOnFailure(newValue) } }
  }
}
