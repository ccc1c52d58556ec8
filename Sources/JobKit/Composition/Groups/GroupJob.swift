import Foundation

/// What ``SequentialGroup`` and ``ConcurrentGroup`` share: a ``JobController`` whose tasks come
/// from ``add(_:)`` (and from a sequence, for a group made with `init(taking:)`) and whose next
/// step (start the next task, or all of them) is decided in the job's callbacks.
///
/// Subclass ``SequentialGroup`` or ``ConcurrentGroup``; this class has no public initializer.
///
/// Added tasks wait in the group until they may start (a sequential group starts each after the
/// one before it finished, a concurrent group starts all of them when it starts). Then they are
/// tracked with the job and added to its ``JobController/taskQueue``, with a completion closure
/// that starts what comes next. A group collects failures (its ``JobController/failurePolicy``
/// is ``FailurePolicy/collect``), so a group with failed tasks finishes with ``JobFailures``.
/// A cancel, a stop on failure, or the group's finish cancels the tasks still waiting and starts
/// them untracked, so they finish at once without running their work. After a cancel or a stop
/// on failure, that happens before the group can finish (a task that is not ready yet is tracked
/// instead, so the group waits until it finished, without running, once ready).
///
/// Adding and stopping follow one rule (see <doc:RoutingAndThreads>, "Adding and stopping"):
/// each add is decided under the group's lock, and an add that hands a task out from another
/// thread holds the job until the task is tracked, so a group never finishes before a task it
/// accepted finished: the task runs, or is cancelled and finishes without running.
///
/// A task that finished cancelled, without an error, and not by the group's doing cancels the
/// group (see ``propagatesTaskCancellation``), which then calls ``onCancelled`` right before it
/// finishes.
///
/// A group made with `init(taking:)` pulls tasks from its sequence in `main()` and in the
/// per-task callback of each task it pulled, serially, never holding a lock, and never more than
/// its `maxRunning` started and not routed at once. A cancel, a stop on failure or the group's
/// finish stops the pulling; the sequence is released once exhausted or when the group finished.
open class GroupJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in lock-protected boxes (`groupState`, the job's).
  let groupState: LockedBox<GroupState>
  /// Whether the group runs its tasks one after another (set once, at init).
  private let isSequential: Bool
  /// The completion every started task is tracked with: one closure for the group's life rather
  /// than one per task. Set once in `init`, before the group is shared, and never written again.
  private var taskCompletion: (@Sendable (Operation) -> Void)?
  /// The sequence a group made with `init(taking:)` takes its tasks from; `nil` otherwise.
  private let source: TaskSource?
  /// As `taskCompletion`, for the tasks pulled from `source` (their slots are freed). Set once in
  /// `init` if there is a source.
  private var sourceCompletion: (@Sendable (Operation) -> Void)?

  /// Creates a sequential or concurrent group that will run `tasks` on `taskQueue` or, if `nil`,
  /// on a concurrent queue the group owns (or `JobController.defaultTaskQueue`, if set). With
  /// `nextTask` (a sequence's iterator, see `TaskSource`), it also takes tasks from it as it runs
  /// them, at most `maxRunning` at once (1 if sequential). Usable from inlinable code for the
  /// public `init(taking:)` initializers, which are inlined into their callers.
  @usableFromInline
  init(
    sequential: Bool, tasks: [Operation], taskQueue: OperationQueue?, taking nextTask: (() -> Operation?)? = nil,
    maxRunning: Int = 1, propagatesTaskCancellation: Bool = false
  ) {
    let source = nextTask.map { TaskSource($0, maxRunning: maxRunning) }
    let mode = sequential ? GroupState.Mode.sequential : .concurrent
    let slots = source.map { _ in sequential ? 1 : max(1, maxRunning) }
    groupState = LockedBox(
      GroupState(mode: mode, sourceMaxRunning: slots, propagatesTaskCancellation: propagatesTaskCancellation))
    isSequential = sequential
    self.source = source
    if let taskQueue {
      super.init(taskQueue: taskQueue)
    } else {
      super.init()
    }
    // Unowned: the group tracks every task it started until that task was routed.
    taskCompletion = { [unowned self] task in self.groupTaskFinished(task) }
    if source != nil {
      sourceCompletion = { [unowned self] task in self.sourceTaskFinished(task) }
    }
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
  /// cancelled or failed cancels the task, which finishes without running, before the group
  /// finishes. An add racing the group's cancel (or fail, or finish) from another thread has
  /// one of these outcomes, never another: the task is accepted and runs (or is cancelled) and
  /// finishes before the group, or it is rejected as after the finish. Do not add a task that is
  /// in a queue already: the group queues it itself.
  public func add(_ task: Operation) {
    addTask(task, reportingRejection: true)
  }

  /// The context shared with every task and nested group (see ``JobContext``). A new, empty one by
  /// default; a parent group replaces it with its own before starting this group (copying over
  /// the values whose keys the parent's lacks). Safe to read from any thread.
  public var context: JobContext {
    get { groupState.withLock { $0.context } }
    set {
      let replaced = groupState.withLock { exchange(&$0.context, with: newValue) }
      _ = replaced  // released after the lock: its values are the user's
    }
  }

  /// Starts the first task (sequential) or every task added so far (concurrent), then pulls
  /// from the source, if any, until its slots are full. Called by the job machinery on the job
  /// queue's thread. A source's `maxRunning` below 1 is reported here, as
  /// ``JobKitError/Code/invalidLimit`` (the group uses 1).
  public final override func main() {
    _ = addFinishObserver(self)
    if let source, !isSequential, source.requestedMaxRunning < 1 {
      reportMisuse(
        .invalidLimit,
        "\(type(of: self)) was given maxRunning \(source.requestedMaxRunning); it needs 1 or more, so it uses 1")
    }
    launch(groupState.withLock { $0.start() })
    pullFromSource()
  }

  /// Lets the group finish (with ``JobFailures`` if a task failed), unless a task is being added
  /// from another thread at this very moment, or such an add (or a resume) started a task that
  /// is not routed yet, or held tasks wait; then the job stays alive (a hold, or the task).
  /// Called by the job's router once every started task was routed, serially with the group's
  /// other callbacks, on the thread that routed the last task.
  public final override func allTasksFinished() {
    switch groupState.withLock({ $0.allTasksFinished() }) {
    case .finish, .keepOpen:
      break
    case .holdOpen:
      holdOpen()
      if groupState.withLock({ $0.holdTaken() }) {
        releaseHold()
      }
    }
  }

  /// The job is being cancelled: the tasks not started yet are cancelled too, and finish before
  /// the group can (see `stopKeepingOpen`).
  override func cancellationRequested() {
    stopKeepingOpen { super.cancellationRequested() }
  }

  /// The job is being failed (``JobController/fail(_:)``, or a sequential group's stop on
  /// failure): as for a cancel, the tasks not started yet are cancelled and finish before the
  /// group can.
  override func failureRequested(_ error: any Error) {
    stopKeepingOpen { super.failureRequested(error) }
  }

  /// Stops the job with `stopJob`, then drops the waiting tasks. A hold on the job, taken before
  /// it stops, keeps it from finishing (on the thread that routes its last task, or on a queue's
  /// thread starting it stopped) until the dropped tasks were started untracked and finished here.
  private func stopKeepingOpen(_ stopJob: () -> Void) {
    let held = holdOpen()
    stopJob()
    stopGroup()
    if held {
      releaseHold()
    }
  }

  /// The job is about to finish: calls ``onCancelled`` if a cancel stopped it, and drops it
  /// either way (after the lock).
  override func jobWillFinish(cancelled: Bool) {
    let handler = groupState.withLock { $0.takeCancellationHandler() }
    if cancelled, let handler {
      handler()
    }
  }

  /// Stopped before `main()` ran (cancelled before its queue started it, or failed): the waiting
  /// tasks finish without running before the job can, on this thread, which holds the router.
  override func stoppedBeforeMain() {
    stopGroup()
  }

  /// Adds `task`. Returns `false`, changing nothing, when the group is done; that is reported as
  /// ``JobKitError/Code/trackedAfterJobFinished`` if `reportingRejection` is `true`.
  ///
  /// An add that would hand the task out (start it, or have the stopping job track it) from
  /// this thread first takes a hold on the job, then decides again (``GroupState/add(_:jobHeld:)``)
  /// and releases the hold once the task is tracked: the job cannot finish in between, by any
  /// path. A refused hold means the job finished: the add is rejected.
  @discardableResult
  func addTask(_ task: Operation, reportingRejection: Bool) -> Bool {
    switch groupState.withLock({ $0.add(task) }) {
    case .accepted(let launch):
      self.launch(launch)
      suspendIfSuspended(task, launch: launch)
      return true
    case .needsJobHold:
      guard holdOpen() else { return rejected(task, reporting: reportingRejection) }
      defer { releaseHold() }
      switch groupState.withLock({ $0.add(task, jobHeld: true) }) {
      case .accepted(let launch):
        self.launch(launch)
        suspendIfSuspended(task, launch: launch)
        return true
      case .rejected, .needsJobHold:
        return rejected(task, reporting: reportingRejection)
      case .duplicate:
        return duplicate(task)
      }
    case .rejected:
      return rejected(task, reporting: reportingRejection)
    case .duplicate:
      return duplicate(task)
    }
  }

  /// The tasks waiting for their turn are suspended and resumed with the group's tracked
  /// children (see `JobController.untrackedChildren(suspending:)`).
  override func untrackedChildren(suspending: Bool) -> [ConcurrentOperation] {
    groupState.withLock { suspending ? $0.suspendWaiting() : $0.resumeWaiting() }
  }

  /// `task` was not added: the group is done. Returns `false`.
  private func rejected(_ task: Operation, reporting: Bool) -> Bool {
    if reporting {
      reportMisuse(
        .trackedAfterJobFinished,
        "\(type(of: task)) was added to \(type(of: self)) after the group finished; it was not started"
      )
    }
    return false
  }

  /// `task` is in the group already. Returns `true`.
  private func duplicate(_ task: Operation) -> Bool {
    reportMisuse(.taskAlreadyTracked, "\(type(of: task)) was added to \(type(of: self)) twice; ignored")
    return true
  }

  /// Carries out `launch` (see ``GroupState/Launch``). Never called with a lock held.
  func launch(_ launch: GroupState.Launch) {
    if launch.cancelled {
      if !launch.tasks.isEmpty {
        finishCancelled(launch.tasks, jobWaits: launch.jobWaits)
      }
    } else if !launch.tasks.isEmpty, let taskCompletion {
      for task in launch.tasks {
        launch.context.inject(into: task)
        trackAndQueue(task, completion: taskCompletion)
      }
      // Tracked now: a resume from here on tells them as the job's children.
      if !launch.suspendedWhileWaiting.isEmpty, !isSuspended {
        for task in launch.suspendedWhileWaiting {
          task.resume()
        }
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

  /// Has `tasks`, dropped before they started, finish cancelled (see the other
  /// `finishCancelled`) on this thread's step drain (`ThreadDrain.carryOut(_:)`), so a tree of
  /// nested groups that never started finishes in constant stack: a dropped group drops its own
  /// tasks as a later step instead of inside this one. A hold taken now, released as the last
  /// step, keeps the job from finishing until every dropped task finished, if the job has not
  /// finished already (the caller keeps it from finishing until this returns, with a hold or
  /// the router).
  private func finishCancelled(_ tasks: GroupState.Tasks, jobWaits: Bool) {
    var steps: [() -> Void] = tasks.map { task in { self.finishCancelled(task, jobWaits: jobWaits) } }
    if holdOpen() {
      steps.append { self.releaseHold() }
    }
    ThreadDrain.carryOut(steps)
  }

  /// Cancels `task`, which was never started, and starts it on this thread, untracked, so it
  /// finishes at once without running its work. A task that is not ready yet is tracked with the
  /// job if `jobWaits` (the job is stopping and cannot finish meanwhile: it queues the task and
  /// waits for it), else (the job finished) goes to the queue, which starts it as soon as it is
  /// ready; one that runs or finished elsewhere is left alone (queueing it again would be a
  /// fatal error in Foundation).
  private func finishCancelled(_ task: Operation, jobWaits: Bool) {
    task.cancel(handingDown: stopReason())
    guard !task.isExecuting && !task.isFinished else { return }
    if task.isReady {
      task.start()
    } else if jobWaits {
      trackAndQueue(task)
    } else {
      taskQueue.addOperation(task)
    }
  }

  /// Pulls tasks from the source while a slot is free, tracking and queueing each. Called only
  /// from `main()` and the per-task callbacks, which the job runs serially. Re-entrant: a task's
  /// callback nested in a `trackAndQueue` made here pulls on its own (its slot was reserved
  /// under the lock first), and this loop then finds the slots taken.
  private func pullFromSource() {
    guard let source, let sourceCompletion else { return }
    while groupState.withLock({ $0.reservePull() }) {
      let next = source.next()
      switch groupState.withLock({ $0.pulled(next) }) {
      case .start(let task, let context):
        context.inject(into: task)
        trackAndQueue(task, completion: sourceCompletion)
      case .duplicate(let task):
        reportMisuse(
          .taskAlreadyTracked, "\(type(of: task)) came from \(type(of: self))'s sequence while in the group; ignored")
      case .stop(let launch):
        self.launch(launch)
        return
      }
    }
  }

  /// The per-task completion of every started task but the source's, delivered by the job's
  /// router.
  func groupTaskFinished(_ task: Operation) {
    _ = routeTask(task, fromSource: false)
  }

  /// The per-task completion of a task pulled from the source: its slot is free, so the next
  /// task is pulled (before the router can decide the job is done).
  private func sourceTaskFinished(_ task: Operation) {
    if routeTask(task, fromSource: true) {
      pullFromSource()
    }
  }

  /// Carries out a routed task's transition. Returns `false` if the group stopped on its failure
  /// or its cancel.
  private func routeTask(_ task: Operation, fromSource: Bool) -> Bool {
    // Only a sequential group stops on a failure; a concurrent one need not ask.
    let error = isSequential ? (task as? ConcurrentOperation)?.error : nil
    // Read here, outside every lock (`isCancelled` may be the user's override). The job delivers
    // no per-task callback once it stopped, so the group did not cancel this task.
    let cancelledItself = task.isCancelled && (isSequential ? error : (task as? ConcurrentOperation)?.error) == nil
    let routing = groupState.withLock {
      $0.taskFinished(task, error: error, cancelledItself: cancelledItself, fromSource: fromSource)
    }
    switch routing {
    case .launch(let launch):
      self.launch(launch)
      return true
    case .fail(let error):
      fail(error)  // which stops the group too (see `failureRequested`)
      return false
    case .cancel:
      // With the task's reason, which the group's other tasks then see (a plain cancel's is
      // `CancellationError`). Read outside every lock: the task's own.
      cancel(reason: (task as? ConcurrentOperation)?.cancellationReason ?? CancellationError())
      return false  // the cancel dropped the waiting tasks (see `cancellationRequested`)
    }
  }

  /// After a cancel or a stop on failure: the waiting tasks finish without running. The caller
  /// keeps the job from finishing until this returns (a hold, or the router it holds), so the
  /// group never finishes while a task it dropped has not.
  func stopGroup() {
    launch(groupState.withLock { $0.stop() })
  }

  /// Pauses or resumes starting tasks (see ``GroupState/Hold``). A resume that starts held tasks
  /// holds the job until they are tracked, as an add does (see `addTask`).
  func setHeld(_ isHeld: Bool, generation: UInt64) {
    switch groupState.withLock({ $0.setHold(isHeld, generation: generation) }) {
    case .launch(let launch):
      self.launch(launch)
    case .needsJobHold:
      // Refused: the job finished, and nothing waits to start any more.
      guard holdOpen() else { return }
      if case .launch(let launch) = groupState.withLock({ $0.setHold(isHeld, generation: generation, jobHeld: true) }) {
        self.launch(launch)
      }
      releaseHold()
    }
  }

  /// Makes `context` this group's context (see ``ContextSharing``).
  func adoptContext(_ context: JobContext) {
    context.addMissingValues(from: groupState.withLock { $0.context })
    let replaced = groupState.withLock { exchange(&$0.context, with: context) }
    _ = replaced  // released after the lock: its values are the user's
  }

  /// The job finished (any way): tasks still waiting finish without running, and the source,
  /// if any, is released (no callback will pull from it again).
  func operationDidFinish(_ operation: ConcurrentOperation) {
    launch(groupState.withLock { $0.jobFinished() })
    source?.drop()
  }
}

extension GroupJob: ContextSharing, OperationFinishObserver {}
