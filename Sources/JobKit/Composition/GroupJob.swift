import Foundation

/// What ``SequentialGroup`` and ``ConcurrentGroup`` share: a ``JobController`` whose tasks come
/// from ``add(_:)`` and whose next step (start the next task, or all of them) is decided in the
/// job's callbacks.
///
/// Subclass ``SequentialGroup`` or ``ConcurrentGroup``; this class has no public initializer.
///
/// Added tasks wait in the group until they may start (a sequential group starts each after the
/// one before it finished, a concurrent group starts all of them when it starts). Then they are
/// tracked with the job and added to its ``JobController/taskQueue``, with a completion closure
/// that starts what comes next. A group collects failures (its ``JobController/failurePolicy``
/// is ``FailurePolicy/collect``), so a group with failed tasks finishes with ``JobFailures``.
/// A cancel, a stop on failure, or the group's finish cancels the tasks still waiting and starts
/// them untracked, so they finish at once without running their work.
open class GroupJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in lock-protected boxes (`groupState`, the job's).
  let groupState: LockedBox<GroupState>
  /// Whether the group runs its tasks one after another (set once, at init).
  private let isSequential: Bool
  /// The completion every started task is tracked with: one closure for the group's life rather
  /// than one per task. Set once in `init`, before the group is shared, and never written again.
  private var taskCompletion: (@Sendable (Operation) -> Void)?

  /// Creates a group in `mode` that will run `tasks`, on `taskQueue` or, if `nil`, on a
  /// concurrent queue the group owns (or `JobController.defaultTaskQueue`, if set).
  init(mode: GroupState.Mode, tasks: [Operation], taskQueue: OperationQueue?) {
    groupState = LockedBox(GroupState(mode: mode))
    isSequential = mode == .sequential
    if let taskQueue {
      super.init(taskQueue: taskQueue)
    } else {
      super.init()
    }
    // Unowned: the group tracks every task it started until that task was routed.
    taskCompletion = { [unowned self] task in self.groupTaskFinished(task) }
    failurePolicy = .collect
    for task in tasks {
      add(task)
    }
  }

  /// Adds `task` to the group. Safe from any thread, before or while the group runs.
  ///
  /// The group keeps the task (a running group stays alive until the task ran) and queues and
  /// tracks it when its turn comes: in a ``SequentialGroup`` after every task added before it
  /// finished, in a ``ConcurrentGroup`` when the group starts, or at once if it runs. Adding a
  /// task after the group finished changes nothing and is reported as
  /// ``JobKitError/Code/trackedAfterJobFinished`` (in ``ConcurrentOperation/misuses`` and to
  /// ``JobKitDiagnostics``); adding one twice is reported as
  /// ``JobKitError/Code/taskAlreadyTracked`` and ignored. Adding to a group that is being
  /// cancelled cancels the task and lets it finish without running. Do not add a task that is in
  /// a queue already: the group queues it itself.
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

  /// Starts the first task (sequential) or every task added so far (concurrent). Called by the
  /// job machinery on the job queue's thread.
  public final override func main() {
    _ = addFinishObserver(self)
    launch(groupState.withLock { $0.start() })
  }

  /// Lets the group finish (with ``JobFailures`` if a task failed), unless a task is being added
  /// from another thread at this very moment or held tasks wait; then a hold keeps the job alive.
  /// Called by the job's router once every started task was routed, serially with the group's
  /// other callbacks, on the thread that routed the last task.
  public final override func allTasksFinished() {
    switch groupState.withLock({ $0.allTasksFinished() }) {
    case .finish:
      break
    case .holdOpen:
      holdOpen()
      if groupState.withLock({ $0.holdTaken() }) {
        releaseHold()
      }
    }
  }

  /// The job is being cancelled: the tasks not started yet are cancelled too.
  override func cancellationRequested() {
    super.cancellationRequested()
    stopGroup()
  }

  /// Adds `task`. Returns `false`, changing nothing, when the group is done; that is reported as
  /// ``JobKitError/Code/trackedAfterJobFinished`` if `reportingRejection` is `true`.
  @discardableResult
  func addTask(_ task: Operation, reportingRejection: Bool) -> Bool {
    switch groupState.withLock({ $0.add(task) }) {
    case .rejected:
      if reportingRejection {
        reportMisuse(
          .trackedAfterJobFinished,
          "\(type(of: task)) was added to \(type(of: self)) after the group finished; it was not started"
        )
      }
      return false
    case .duplicate:
      reportMisuse(.taskAlreadyTracked, "\(type(of: task)) was added to \(type(of: self)) twice; ignored")
      return true
    case .accepted(let launch):
      self.launch(launch)
      return true
    }
  }

  /// Carries out `launch` (see ``GroupState/Launch``). Never called with a lock held.
  func launch(_ launch: GroupState.Launch) {
    if launch.cancelled {
      for task in launch.tasks {
        finishCancelled(task)
      }
    } else if !launch.tasks.isEmpty, let taskCompletion {
      for task in launch.tasks {
        launch.context.inject(into: task)
        trackAndQueue(task, completion: taskCompletion)
      }
    }
    var releasesHold = launch.releasesHold
    if launch.inFlight, groupState.withLock({ $0.endInFlight() }) {
      releasesHold = true
    }
    if releasesHold {
      releaseHold()
    }
  }

  /// Cancels `task`, which was never started, and starts it on this thread, untracked, so it
  /// finishes at once without running its work. A task that is not ready yet goes to the queue,
  /// which starts it as soon as it is; one that runs or finished elsewhere is left alone (queueing
  /// it again would be a fatal error in Foundation).
  private func finishCancelled(_ task: Operation) {
    task.cancel()
    guard !task.isExecuting && !task.isFinished else { return }
    if task.isReady {
      task.start()
    } else {
      taskQueue.addOperation(task)
    }
  }

  /// The per-task completion of every started task, delivered by the job's router.
  func groupTaskFinished(_ task: Operation) {
    // Only a sequential group stops on a failure; a concurrent one need not ask.
    let error = isSequential ? (task as? ConcurrentOperation)?.error : nil
    switch groupState.withLock({ $0.taskFinished(task, error: error) }) {
    case .launch(let launch):
      self.launch(launch)
    case .fail(let error):
      fail(error)
      stopGroup()
    }
  }

  /// After a cancel or a stop on failure: the waiting tasks finish without running.
  func stopGroup() {
    launch(groupState.withLock { $0.stop() })
  }

  /// Pauses or resumes starting tasks (see ``GroupState/Hold``).
  func setHeld(_ isHeld: Bool, generation: UInt64) {
    launch(groupState.withLock { $0.setHold(isHeld, generation: generation) })
  }

  /// Makes `context` this group's context (see ``ContextSharing``).
  func adoptContext(_ context: JobContext) {
    context.addMissingValues(from: groupState.withLock { $0.context })
    groupState.withLock { $0.context = context }
  }

  /// The job finished (any way): tasks still waiting finish without running.
  func operationDidFinish(_ operation: ConcurrentOperation) {
    launch(groupState.withLock { $0.jobFinished() })
  }
}

extension GroupJob: ContextSharing, OperationFinishObserver {}
