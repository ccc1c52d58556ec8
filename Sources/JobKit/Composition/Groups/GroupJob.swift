import Foundation

/// What ``SequentialGroup`` and ``ConcurrentGroup`` share: a ``JobController`` whose tasks come
/// from ``add(_:)`` (and from a sequence, for a group made with `init(taking:)`) and whose next
/// step (start the next task, or all of them) is decided in the job's callbacks.
///
/// Subclass ``SequentialGroup`` or ``ConcurrentGroup``; this class has no public initializer.
///
/// A group never finishes before a task it accepted finished: each add is decided under the job's
/// lock. A group collects failures and finishes with ``JobFailures``. How adding, stopping and
/// taking from a sequence work: <doc:GroupRules>.
open class GroupJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: all mutable state is under the job's lock (the job's, and `groupState`).
  /// What the group decides beside its job's admission, kept under the job's lock (see
  /// `withGroupState`).
  let groupState: JobGuarded<GroupState>
  /// Whether the group runs its tasks one after another (set once, at init).
  private let isSequential: Bool
  /// The completion every added task is tracked with: one closure for the group's life rather
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
    groupState = JobGuarded(
      GroupState(mode: mode, sourceMaxRunning: slots, propagatesTaskCancellation: propagatesTaskCancellation))
    isSequential = sequential
    self.source = source
    if let taskQueue {
      super.init(taskQueue: taskQueue)
    } else {
      super.init()
    }
    // Unowned: the group tracks every task it was given until that task was routed.
    taskCompletion = { [unowned self] task in self.groupTaskFinished(task) }
    if source != nil {
      sourceCompletion = { [unowned self] task in self.sourceTaskFinished(task) }
    }
    let context = JobContext()
    withJobLock(groupState) { job, group in
      group.configure(&job)
      _ = job.replaceSharedAdmission(with: context)
    }
    failurePolicy = .collect
    for task in tasks {
      add(task)
    }
  }

  /// Adds `task` to the group. Safe from any thread, before or while the group runs.
  ///
  /// The group tracks the task at once (a running group stays alive until the task ran) and
  /// queues it when its turn comes: in a ``SequentialGroup`` after every task added before it
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
    get { sharedContext() }
    set { replaceContext(with: newValue) }
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
    performExits(withJobLock(groupState) { job, group in group.start(job: &job) })
    pullFromSource()
  }

  /// Lets the group finish (with ``JobFailures`` if a task failed): every task it was given was
  /// tracked when it was added, so none is left when this is called. Called by the job's router
  /// once every task was routed, serially with the group's other callbacks, on the thread that
  /// routed the last task.
  public final override func allTasksFinished() {}

  /// The job is about to finish: calls ``onCancelled`` if a cancel stopped it, and drops it
  /// either way (after the lock).
  override func jobWillFinish(cancelled: Bool) {
    let handler = withGroupState { $0.takeCancellationHandler() }
    if cancelled, let handler {
      handler()
    }
  }

  /// Adds `task`: tracks it to wait for the job's admission. Returns `false`, changing nothing,
  /// when the job finished; that is reported as ``JobKitError/Code/trackedAfterJobFinished`` if
  /// `reportingRejection` is `true`. A task added while the group is suspended is suspended too.
  @discardableResult
  func addTask(_ task: Operation, reportingRejection: Bool) -> Bool {
    guard let taskCompletion else { return false }
    let node = TaskNodeWithCompletion(job: self, task: task, completion: taskCompletion)
    switch trackForAdmission(task, node: node, reportsJobFinished: false) {
    case .tracked(let jobSuspended):
      if jobSuspended {
        suspendIfSuspended(task)
      }
      return true
    case .duplicate:
      return true
    case .jobFinished:
      if reportingRejection {
        reportMisuse(
          .trackedAfterJobFinished,
          "\(type(of: task)) was added to \(type(of: self)) after the group finished; it was not started"
        )
      }
      return false
    }
  }

  /// `task` was added while the group's suspension concerned its new children: the suspension
  /// told the children it tracked then, so it is suspended here if the group still is. A resume
  /// that came meanwhile may have missed it: the group looks again after suspending it.
  private func suspendIfSuspended(_ task: Operation) {
    guard isSuspended, let child = task as? ConcurrentOperation else { return }
    child.suspend()
    if !isSuspended {
      child.resume()
    }
  }

  /// A task leaving the admission line gets the group's context (`shared`) before it is queued.
  override func prepareForAdmission(_ task: Operation, shared: AnyObject?) {
    if let shared {
      // Unchecked: a group's shared admission object is only ever its context (per task).
      unsafeDowncast(shared, to: JobContext.self).inject(into: task)
    }
  }

  /// Pulls tasks from the source while a slot is free, tracking and queueing each. Called only
  /// from `main()` and the per-task callbacks, which the job runs serially; `reserved` if a
  /// slot was reserved already (by the callback's routing transition). Re-entrant: a task's
  /// callback nested in a `track` made here pulls on its own (its slot was reserved under the
  /// lock first), and this loop then finds the slots taken. A pull costs one lock, its task's
  /// `track`: the slot and the context come from the reservation, and the loop asks for the
  /// next slot only if this one was not the last free one.
  private func pullFromSource(reserved: consuming GroupState.ReservedPull? = nil) {
    guard let source, let sourceCompletion else { return }
    // Reservations are moved, not copied: a copy retains their context again.
    var slot: GroupState.ReservedPull?
    if let reserved = consume reserved {
      slot = reserved
    } else {
      slot = withJobLock(groupState) { job, group in group.reservePull(job: job) }
    }
    while let reservation = consume slot {
      guard let task = source.next() else {
        performExits(withJobLock(groupState) { job, group in group.sourceExhausted(job: &job) })
        return
      }
      prepareForAdmission(task, shared: reservation.shared)
      let node = TaskNodeWithCompletion(job: self, task: task, completion: sourceCompletion)
      let tracked = track(task, node: node, queue: queueOfTasks) != nil
      if tracked, reservation.isLast { return }
      slot = withJobLock(groupState) { job, group in
        if !tracked {
          group.pullNotTracked()
        }
        return group.reservePull(job: job)
      }
    }
  }

  /// The per-task completion of every added task, called by the job's router.
  func groupTaskFinished(_ task: Operation) {
    _ = routeTask(task, fromSource: false)
  }

  /// The per-task completion of a task pulled from the source: its slot is free, so the next
  /// task is pulled (before the router can decide the job is done).
  private func sourceTaskFinished(_ task: Operation) {
    if let reserved = routeTask(task, fromSource: true) {
      pullFromSource(reserved: reserved)
    }
  }

  /// Carries out a routed task's transition. Returns the slot reserved for the next pull, if
  /// one was.
  private func routeTask(_ task: Operation, fromSource: Bool) -> GroupState.ReservedPull? {
    // Read here, outside every lock. The job calls no per-task callback once it stopped, so
    // the group did not cancel this task.
    let (error, cancelledItself) = outcome(of: task)
    // A concurrent group's added task that did not cancel itself changes nothing.
    guard isSequential || fromSource || cancelledItself else { return nil }
    let routing = withJobLock(groupState) { job, group in
      group.taskRouted(task, error: error, cancelledItself: cancelledItself, fromSource: fromSource, job: &job)
    }
    switch consume routing {
    case .proceed(let exit, let pull):
      if let exit {
        performExit(exit)
      }
      return pull
    case .fail(let error):
      fail(error)  // which lets the waiting tasks go, cancelled
      return nil
    case .cancel:
      // With the task's reason, which the group's other tasks then see (a plain cancel's is
      // `CancellationError`). Read outside every lock: the task's own.
      cancel(reason: (task as? ConcurrentOperation)?.cancellationReason ?? CancellationError())
      return nil  // the cancel lets the waiting tasks go, cancelled
    }
  }

  /// A finished task's error, and whether it cancelled itself (it finished cancelled, without
  /// an error). A ``ConcurrentOperation`` tells both in one read of its state (a cancel counts if
  /// it was recorded before the finish); for any other operation, Foundation's `isCancelled`
  /// (which may be the user's override).
  private func outcome(of task: Operation) -> (error: (any Error)?, cancelledItself: Bool) {
    guard let operation = task as? ConcurrentOperation else { return (nil, task.isCancelled) }
    let (error, cancelled) = operation.finishOutcome
    return (error, cancelled && error == nil)
  }

  /// Pauses or resumes starting tasks (the job's admission, see `JobAdmission.setPaused`).
  func setHeld(_ isHeld: Bool, generation: UInt64) {
    let exits = withJobState { $0.setAdmissionPaused(isHeld, generation: generation) }
    if !exits.isEmpty {
      performExits(exits)
    }
  }

  /// Whether the group still runs its tasks (its job neither stops nor finished).
  var isRunningTasks: Bool {
    readJobState { !$0.phase.isStopping && !$0.phase.isFinished }
  }

  /// Makes `context` this group's context (see ``ContextSharing``).
  func adoptContext(_ context: JobContext) {
    context.addMissingValues(from: sharedContext())
    replaceContext(with: context)
  }

  private func sharedContext() -> JobContext {
    let shared = readJobState { $0.admission.shared }
    return shared.flatMap { $0 as? JobContext } ?? JobContext()
  }

  private func replaceContext(with context: JobContext) {
    let replaced = withJobState { $0.replaceSharedAdmission(with: context) }
    _ = replaced  // released after the lock: its values are the user's
  }

  /// The job finished (any way): the source, if any, is released (no callback will pull from
  /// it again).
  func operationDidFinish(_ operation: ConcurrentOperation) {
    source?.drop()
  }
}

extension GroupJob: ContextSharing, OperationFinishObserver {}

extension GroupJob {
  /// Applies `transition` to the group's state alone, under the job's lock (the group has no
  /// lock of its own).
  func withGroupState<Result>(_ transition: (inout GroupState) -> Result) -> Result {
    withJobLock(groupState) { _, group in transition(&group) }
  }
}
