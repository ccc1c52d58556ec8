import Foundation

/// A job that starts all its tasks at once and finishes when all of them finished: MGCommand's
/// `MGCommandGroup`, CompositeOperations' transactional operation.
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
/// As for ``SequentialGroup``: each task that adopts ``ContextConsuming`` gets ``context`` right
/// before it is queued, nested groups share it, and the group's bookkeeping runs serially with
/// its other job callbacks, on the thread that finished a task.
open class ConcurrentGroup: JobController, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in lock-protected boxes (`groupState`, the job's).
  let groupState = LockedBox(GroupState(mode: .concurrent))

  /// Creates a group that will start `tasks`, and any tasks added later, together, on a
  /// concurrent ``JobController/taskQueue`` the group owns.
  public init(_ tasks: [Operation] = []) {
    super.init()
    setUp(adding: tasks)
  }

  /// Creates a group that will start `tasks`, and any tasks added later, together, on
  /// `taskQueue` (for example a serial queue, or one shared with other jobs).
  public init(_ tasks: [Operation] = [], taskQueue: OperationQueue) {
    super.init(taskQueue: taskQueue)
    setUp(adding: tasks)
  }

  /// Adds `task` to the group. Safe from any thread, before or while the group runs.
  ///
  /// The group keeps the task and queues (and tracks) it when the group starts, or at once if
  /// the group runs. Adding a task after the group finished changes nothing and is reported as
  /// ``JobKitError/Code/trackedAfterJobFinished`` (in ``ConcurrentOperation/misuses`` and to
  /// ``JobKitDiagnostics``); adding one twice is reported as ``JobKitError/Code/taskAlreadyTracked``
  /// and ignored. Adding to a group that is being cancelled cancels the task and lets it finish
  /// without running. Do not add a task that is in a queue already: the group queues it itself.
  public func add(_ task: Operation) {
    addTask(task, reportingRejection: true)
  }

  /// The context shared with every task and nested group (see ``JobContext``). A new, empty one by
  /// default; a parent group replaces it with its own before starting this group (copying over
  /// the values whose keys the parent's lacks). Safe to read from any thread.
  public var context: JobContext {
    get { groupState.withLock { $0.context } }
    set { groupState.withLock { $0.context = newValue } }
  }

  /// Queues every task added so far. Called by the job machinery on the job queue's thread.
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

extension ConcurrentGroup: GroupJob {}
