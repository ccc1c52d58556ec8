import Foundation

/// A job that runs its tasks one after another, in the order they were added: MGCommand's
/// `MGSequentialCommandGroup`, CompositeOperations' cascade, Gummi Commander's sequence command.
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
/// all see the whole tree done.
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
/// waited for. The tasks not started yet are cancelled and started on the cancelling thread, so
/// they finish before `cancel()` returns, without running their work. The group then finishes
/// once, cancelled (``ConcurrentOperation/error`` is `nil`).
///
/// ### Context
/// Before starting a task, the group hands it ``context`` if it adopts ``ContextConsuming`` (as
/// ``BlockTask`` does); a nested group adopts this group's context as its own, so the same
/// instance is shared all the way down.
///
/// ### Threads
/// The group starts each task from the thread that finished the previous one (or from `main()` on
/// its job queue thread, or from the thread calling ``add(_:)`` when the group was idle); the tasks
/// themselves run on ``JobController/taskQueue``'s threads. The group's bookkeeping runs serially
/// with its other job callbacks. Subclasses may override ``JobController/taskFinished(_:)`` and
/// ``JobController/taskGroupFinished(_:)`` for tasks they ``JobController/track(_:)`` themselves;
/// the added tasks are routed through the group's own completion closures.
open class SequentialGroup: JobController, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in lock-protected boxes (`groupState`, the job's).
  let groupState = LockedBox(GroupState(mode: .sequential))

  /// Creates a group that will run `tasks` in order, then any tasks added later, on a
  /// concurrent ``JobController/taskQueue`` the group owns.
  public init(_ tasks: [Operation] = []) {
    super.init()
    setUp(adding: tasks)
  }

  /// Creates a group that will run `tasks` in order, then any tasks added later, on
  /// `taskQueue` (for example a serial queue, or one shared with other jobs).
  public init(_ tasks: [Operation] = [], taskQueue: OperationQueue) {
    super.init(taskQueue: taskQueue)
    setUp(adding: tasks)
  }

  /// Appends `task` to the group. Safe from any thread, before or while the group runs.
  ///
  /// The group keeps the task (a running group stays alive until it ran) and starts it after the
  /// tasks added before it finished; it is tracked by the job when it starts. Adding a task after the group finished changes nothing and is
  /// reported as ``JobKitError/Code/trackedAfterJobFinished`` (in ``ConcurrentOperation/misuses``
  /// and to ``JobKitDiagnostics``); adding one twice is reported as
  /// ``JobKitError/Code/taskAlreadyTracked`` and ignored. Adding to a group that is being cancelled
  /// cancels the task and lets it finish without running. Do not add a task that is in a queue
  /// already: the group queues it itself.
  public func add(_ task: Operation) {
    addTask(task, reportingRejection: true)
  }

  /// Whether the first failed task ends the group, which then finishes with that task's error
  /// (Gummi Commander's `stopWhenNoSuccess`). Default `false`: the group runs every task and
  /// finishes with ``JobFailures``. Set it before the group runs; safe from any thread.
  public var stopsOnFailure: Bool {
    get { groupState.withLock { $0.stopsOnFailure } }
    set { groupState.withLock { $0.stopsOnFailure = newValue } }
  }

  /// The context shared with every task and nested group (see ``JobContext``). A new, empty one by
  /// default; a parent group replaces it with its own before starting this group (copying over
  /// the values whose keys the parent's lacks). Safe to read from any thread.
  public var context: JobContext {
    get { groupState.withLock { $0.context } }
    set { groupState.withLock { $0.context = newValue } }
  }

  /// Starts the first task. Called by the job machinery on the job queue's thread.
  public final override func main() {
    startGroup()
  }

  /// Lets the group finish (with ``JobFailures`` if a task failed), unless a task is being added
  /// from another thread at this very moment; then the group waits for it.
  public final override func allTasksFinished() {
    finishGroup()
  }

  /// The job is being cancelled: the tasks not started yet are cancelled too.
  override func cancellationRequested() {
    super.cancellationRequested()
    stopGroup()
  }
}

extension SequentialGroup: GroupJob {}
