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
/// ### Order
/// Each task is started (added to ``JobController/taskQueue``) only after the previous one
/// finished and was routed, so a task sees everything the earlier ones did. Tasks added while the
/// group runs, from any thread or from a running task, go to the end of the line; tasks added
/// from several threads at once are lined up in the order the group accepts them (each thread's
/// in the order of its calls). Groups nest
/// to any depth: a nested group is one step, finished only when everything inside it is. The
/// group finishes once the last task finished and nothing more was added, so `completionBlock`,
/// dependents, `waitUntilFinished()`, ``JobController/run()`` and ``ConcurrentOperation/runAndWait()``
/// all see the whole tree done. A group made with ``init(taking:taskQueue:)`` takes its tasks
/// from a sequence, each when the one before it finished, so it holds one at a time.
///
/// ### Failure
/// A task fails when it finishes with an ``ConcurrentOperation/error`` (a throwing ``BlockTask``,
/// a ``ConcurrentOperation`` that called ``ConcurrentOperation/operationDone(error:)`` with one, a
/// failed nested group). By default the group goes on with the next task and, once all are done,
/// finishes with a ``JobFailures`` error listing every failure in order; the list is also
/// ``JobController/failures``, readable from any thread. With ``stopsOnFailure`` the first failure
/// ends the group: the tasks not started yet are cancelled and never run, and the group finishes
/// with that task's error itself. (The group sets ``JobController/failurePolicy`` to
/// ``FailurePolicy/collect``; prefer ``stopsOnFailure`` to ``FailurePolicy/failFast``, with which
/// the waiting tasks are cancelled only once the group finished.)
///
/// ### Cancel
/// `cancel()` (or cancelling a parent group, or the Swift task awaiting ``JobController/run()``)
/// cancels the running task, so a cancellable task stops and any other runs to its end and is
/// waited for. The tasks not started yet are cancelled and started on the cancelling thread (or,
/// for a group its queue starts at that moment, on the starting thread if it gets there first),
/// so they finish without running their work, and before the group finishes. The group then
/// finishes once, cancelled (``ConcurrentOperation/error`` is `nil`).
///
/// A step that cancels itself cancels the group (CompositeOperations' cascade): a task that
/// finished with `isCancelled` `true` and no error, which the group did not cancel (its own
/// `cancel()`, another thread, a nested group that ended cancelled, a ``BlockTask`` or ``Work``
/// whose body threw `CancellationError`), is handled as a `cancel(reason:)` of the group, with
/// the task's ``ConcurrentOperation/cancellationReason``, on the thread that finished it, so the
/// later steps never run. The group's
/// ``GroupJob/onCancelled`` handler is called once, right before a cancelled group finishes;
/// ``JobController/run()`` throws the reason (`CancellationError` for a task cancelled plainly).
/// ``GroupJob/propagatesTaskCancellation`` turns this off.
///
/// ### Context
/// Before starting a task, the group hands it ``GroupJob/context`` if it adopts ``ContextConsuming`` (as
/// ``BlockTask`` does); a nested group adopts this group's context as its own, so the same
/// instance is shared all the way down.
///
/// ### Threads
/// The group starts each task from the thread that finished the previous one (or from `main()` on
/// its job queue thread, or from the thread calling ``GroupJob/add(_:)`` when the group was idle); the tasks
/// themselves run on ``JobController/taskQueue``'s threads. The group's bookkeeping runs serially
/// with its other job callbacks. Subclasses may override ``JobController/taskFinished(_:)`` and
/// ``JobController/taskGroupFinished(_:)`` for tasks they ``JobController/track(_:)`` themselves;
/// the added tasks are routed through the group's own completion closures.
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
