import Foundation

/// The state of one ``SequentialGroup`` or ``ConcurrentGroup``: which added tasks wait, which one
/// runs (sequential), how many of its source's tasks run, and whether the group still accepts
/// tasks. Changed only by the pure transitions below, under the group's lock; each returns a
/// ``Launch`` (or an outcome carrying one) the caller carries out after releasing it.
///
/// A task is tracked with the job only when it starts; until then it waits in `pending`.
///
/// **Add versus stop.** Every add is decided in one transition, under the group's lock, into an
/// outcome that guarantees the task finishes before the group does: before `main()` it waits in
/// `pending` (which the start takes or a stop drops, under the same lock); once the group runs
/// or stops, an add that would hand a task out from another thread (`add`, a resume) first needs
/// a hold on the job (`JobController.holdOpen()`, taken *before* the transition: `.needsJobHold`
/// asks for it), so no way of finishing the job (a cancel, a fail, a `.failFast` failure, the
/// last task's routing) can finish it before the task is tracked. Such a start counts as *in
/// flight* until its task is tracked. A running group queues the task (or keeps it in `pending`
/// until its turn); a stopping group has the job track it, which cancels it and waits for it; a
/// group whose job finished (the hold is refused) or that closed rejects it, changing nothing.
/// A stop drops `pending` (the dropped tasks are cancelled and finish before the job can) and
/// never waits for anything else: the adds in flight hold the job themselves.
///
/// `allTasksFinished()` closes the group only when every task it handed out was routed, nothing
/// is in flight and no held task waits; with held tasks waiting it takes a hold on the job, which
/// keeps the job from finishing until the group releases it. The router decides to call
/// `allTasksFinished()` before it does, so an add or a resume from another thread can take its
/// hold in between, hand a task out and have it tracked, all before the call: the group then
/// finds that task unrouted and stays open (the job, which tracks it, does not finish either).
///
/// A group with a task source (`TaskSource`) pulls its tasks only inside `main()` and the job's
/// per-task callbacks, one slot at a time (`reservePull()`, then `pulled(_:)`), so the job cannot
/// finish while a pulled task is on its way to being tracked. Holds (`setHold`) pause added tasks
/// only: the groups that are held (``CommandQueue``'s bursts) have no source.
struct GroupState {
  enum Mode {
    case sequential
    case concurrent
  }

  enum Phase: Equatable {
    /// `main()` has not run; added tasks wait.
    case waiting
    /// Tasks start as the mode says.
    case running
    /// Cancelled or failed: waiting and later tasks are cancelled and never start their work.
    case stopping
    /// The group is done (or the job finished); later adds are rejected.
    case closed
  }

  /// A pause set from outside (``CommandQueue``): while held, no task starts. Each change carries
  /// a generation, so a stale change arriving late cannot undo a newer one.
  struct Hold {
    var isHeld = false
    var generation: UInt64 = 0
  }

  /// Whether the group keeps its job from finishing (the job's keep-alive hold, see
  /// `JobController.holdOpen()`), because held tasks wait.
  enum KeepAlive {
    case none
    /// `allTasksFinished()` is taking a hold.
    case taking
    /// The hold is taken; it is released when the group no longer needs it.
    case held
  }

  let mode: Mode
  var phase = Phase.waiting
  var context = JobContext()
  var stopsOnFailure = false
  var hold = Hold()
  /// Added and not started, oldest first. Not tracked with the job.
  var pending = Line<Operation>()
  /// Sequential only: the started task that has not been routed yet.
  var current: Operation?
  /// Every added task not routed or dropped yet, so adding one twice is caught.
  var members: Set<OperationKey> = []
  /// Starts from outside the job's callbacks whose task is not tracked yet (each holds the job).
  var inFlight = 0
  var keepAlive = KeepAlive.none
  /// Waiting tasks the job's suspension suspended (`suspendWaiting()`), until a resume
  /// (`resumeWaiting()`), their start or a stop takes them.
  var suspendedWaiting: [OperationKey: ConcurrentOperation] = [:]
  /// `nil` for a group without a source.
  var source: SourceSlots?
  /// Whether a task that cancelled itself cancels the group (`GroupJob.propagatesTaskCancellation`).
  var propagatesTaskCancellation: Bool
  /// `GroupJob.onCancelled`, until the group finishes (see `GroupState+Cancellation`).
  var cancellationHandler = CancellationHandler.unset

  /// A group in `mode`; with a source if `sourceMaxRunning` is given (at least 1).
  init(mode: Mode, sourceMaxRunning: Int? = nil, propagatesTaskCancellation: Bool = false) {
    self.mode = mode
    source = sourceMaxRunning.map { SourceSlots(maxRunning: $0) }
    self.propagatesTaskCancellation = propagatesTaskCancellation
  }

  /// A source that may still yield tasks: added tasks of a sequential group wait for its end.
  private var sourceIsOpen: Bool {
    guard let source else { return false }
    return !source.isExhausted
  }

  private var needsKeepAlive: Bool {
    hold.isHeld && !pending.isEmpty
  }

  /// Whether a task appended to `pending` now would start at once (from the adding thread).
  private var startsAtOnce: Bool {
    guard phase == .running, !hold.isHeld else { return false }
    switch mode {
    case .concurrent: return true
    case .sequential: return current == nil && !sourceIsOpen
    }
  }

  /// A launch of `tasks`. Tasks leaving `pending` that the suspension had suspended leave
  /// `suspendedWaiting` with it (a look-up only while some are).
  private mutating func launch(_ tasks: Tasks = .none, cancelled: Bool = false) -> Launch {
    var result = Launch(tasks: tasks, cancelled: cancelled, context: context)
    if !suspendedWaiting.isEmpty {
      result.suspendedWhileWaiting = takeSuspendedWaiting(tasks)
    }
    return result
  }

  // MARK: Adding

  enum AddOutcome {
    /// Carry out the launch: the task waits, starts, or (stopping) is tracked and cancelled.
    case accepted(Launch)
    /// The task would be handed out from outside the job's callbacks: take a hold on the job
    /// (`JobController.holdOpen()`), then add again with `jobHeld: true`; if the hold is
    /// refused, the job finished: the add is rejected. Nothing changed.
    case needsJobHold
    /// The group is done: report, change nothing.
    case rejected
    /// The task is already in the group: report, ignore.
    case duplicate
  }

  /// `add(task)` from any thread; `jobHeld` once the caller holds the job (see `AddOutcome`).
  /// Before `main()`, and while a task the add would wait behind runs or the group is held, no
  /// hold is needed: the task waits in `pending`, which the group's callbacks, a resume (which
  /// holds the job) or a stop take under this lock.
  mutating func add(_ task: Operation, jobHeld: Bool = false) -> AddOutcome {
    switch phase {
    case .closed:
      return .rejected
    case .waiting:
      break
    case .running:
      if !jobHeld && startsAtOnce { return .needsJobHold }
    case .stopping:
      guard jobHeld else { return .needsJobHold }
      guard members.insert(OperationKey(task)).inserted else { return .duplicate }
      // Tracked with the stopping job, which cancels it, queues it and waits for it.
      inFlight += 1
      var result = launch(.one(task))
      result.inFlight = true
      return .accepted(result)
    }
    guard members.insert(OperationKey(task)).inserted else { return .duplicate }
    pending.append(task)
    return .accepted(startFromOutside())
  }

  /// Starts what may start now, from a thread that is not running one of the job's callbacks
  /// (and holds the job, if anything starts).
  private mutating func startFromOutside() -> Launch {
    // Taken first: `launch(takeStartable())` would copy the whole state to call `launch`.
    let startable = takeStartable()
    var result = launch(startable)
    if !result.tasks.isEmpty {
      inFlight += 1
      result.inFlight = true
    } else {
      result.releasesHold = releaseHoldIfUnneeded()
    }
    return result
  }

  private mutating func takeStartable() -> Tasks {
    guard phase == .running, !hold.isHeld else { return .none }
    switch mode {
    case .concurrent:
      return Tasks(pending.removeAll())
    case .sequential:
      guard current == nil, !sourceIsOpen, let next = pending.popFirst() else { return .none }
      current = next
      return .one(next)
    }
  }

  /// Whether the job's hold can be released now.
  private mutating func releaseHoldIfUnneeded() -> Bool {
    guard case .held = keepAlive, !needsKeepAlive else { return false }
    keepAlive = .none
    return true
  }

  /// The tasks of an in-flight start are tracked. Returns `true` if the caller must release
  /// the job's hold.
  mutating func endInFlight() -> Bool {
    inFlight -= 1
    return releaseHoldIfUnneeded()
  }

  // MARK: Running

  /// `main()` runs (the job cannot finish meanwhile): start what the mode allows.
  mutating func start() -> Launch {
    guard phase == .waiting else { return launch() }
    phase = .running
    let startable = takeStartable()
    return launch(startable)
  }

  enum Routing {
    case launch(Launch)
    /// The task failed and the group stops on failure: fail the job with `error`.
    case fail(any Error)
    /// The task cancelled itself and the group propagates that: cancel the job, which stops the
    /// group (`stop()` drops the waiting tasks). The group is stopping already, so nothing
    /// starts meanwhile, from any thread.
    case cancel
  }

  /// A started task was routed (in the job's callback), with its error if it failed;
  /// `cancelledItself` if it finished cancelled without an error while the group ran (the
  /// group's callbacks are not delivered once its job stops, so the group did not cancel it);
  /// `fromSource` if it was pulled from the source (its slot is free again).
  mutating func taskFinished(
    _ task: Operation, error: (any Error)?, cancelledItself: Bool = false, fromSource: Bool = false
  ) -> Routing {
    members.remove(OperationKey(task))
    if task === current {
      current = nil
    }
    if fromSource {
      source?.running -= 1
    }
    if cancelledItself, propagatesTaskCancellation, phase == .running {
      phase = .stopping
      return .cancel
    }
    if let error, stopsOnFailure, mode == .sequential, phase == .running {
      return .fail(error)
    }
    let startable = takeStartable()
    return .launch(launch(startable))
  }

  // MARK: Pulling from the source

  /// In `main()` or a per-task callback: whether one more task may be pulled from the source
  /// (the group runs, the source is not exhausted, a slot is free). `true` reserves the slot,
  /// which `pulled(_:)` then fills or frees.
  mutating func reservePull() -> Bool {
    guard phase == .running, var slots = source, !slots.isExhausted, slots.running < slots.maxRunning else {
      return false
    }
    slots.running += 1
    source = slots
    return true
  }

  enum Pull {
    /// Hand the task the context, then track and queue it as a source task; then pull again.
    case start(Operation, JobContext)
    /// The task is in the group already: report it, then pull again.
    case duplicate(Operation)
    /// Carry out the launch and pull no more: the source is exhausted (a sequential group's
    /// added tasks may start now), or the group stopped while the task was pulled (it is
    /// launched cancelled, so it finishes without running).
    case stop(Launch)
  }

  /// The task pulled into the slot `reservePull()` reserved, or `nil` if the source is exhausted.
  mutating func pulled(_ task: Operation?) -> Pull {
    guard let task else {
      source?.running -= 1
      source?.isExhausted = true
      let startable = takeStartable()
      return .stop(launch(startable))
    }
    guard phase == .running else {
      source?.running -= 1
      var result = launch(.one(task), cancelled: true)
      result.jobWaits = phase == .stopping
      return .stop(result)
    }
    guard members.insert(OperationKey(task)).inserted else {
      source?.running -= 1
      return .duplicate(task)
    }
    if mode == .sequential {
      current = task
    }
    return .start(task, context)
  }

  enum HoldOutcome {
    case launch(Launch)
    /// The release would start held tasks from outside the job's callbacks: take a hold on the
    /// job, then set the hold again with `jobHeld: true` (see `AddOutcome.needsJobHold`).
    /// Nothing changed.
    case needsJobHold
  }

  /// Holds or releases the group (from any thread); `jobHeld` once the caller holds the job.
  mutating func setHold(_ isHeld: Bool, generation: UInt64, jobHeld: Bool = false) -> HoldOutcome {
    guard generation >= hold.generation else { return .launch(launch()) }
    let previous = hold
    hold = Hold(isHeld: isHeld, generation: generation)
    if !jobHeld, startsAtOnce, !pending.isEmpty {
      hold = previous
      return .needsJobHold
    }
    return .launch(startFromOutside())
  }

  // MARK: Stopping and finishing

  /// The job is cancelled or failing (the caller holds the job, or its router): the waiting
  /// tasks are cancelled and never start their work, and finish before the job can. Adds in
  /// flight are not waited for here: each holds the job until its task is tracked. A group that
  /// is stopping already (a task cancelled itself, see `Routing.cancel`) drops its waiting
  /// tasks here too; a second stop finds none.
  mutating func stop() -> Launch {
    guard phase != .closed else { return launch() }
    phase = .stopping
    var result = dropPending()
    result.jobWaits = true
    result.releasesHold = releaseHoldIfUnneeded()
    return result
  }

  /// The job finished, however it ended: close, and drop any task still waiting (left over by a
  /// `.failFast` failure policy, which stops the job without a callback).
  mutating func jobFinished() -> Launch {
    phase = .closed
    var result = dropPending()
    result.releasesHold = releaseHoldIfUnneeded()
    return result
  }

  private mutating func dropPending() -> Launch {
    let dropped = pending.removeAll()
    for task in dropped {
      members.remove(OperationKey(task))
    }
    return launch(Tasks(dropped), cancelled: true)
  }

  enum Completion {
    /// Let the job finish.
    case finish
    /// A start is in flight (it holds the job) or a task it handed out is tracked and not
    /// routed yet: the job therefore does not finish now, and `allTasksFinished()` is called
    /// again once the hold was released or the task was routed. Do nothing.
    case keepOpen
    /// Take a hold on the job (`JobController.holdOpen()`), then call `holdTaken`.
    case holdOpen
  }

  /// The job's `allTasksFinished()`: close unless a task handed out is not routed yet (started
  /// from another thread after the router decided to call it, see the type's documentation), a
  /// start is in flight, or held tasks wait.
  mutating func allTasksFinished() -> Completion {
    // `members` holds the waiting tasks and those handed out and not routed yet.
    guard inFlight == 0, members.count == pending.count else { return .keepOpen }
    guard !needsKeepAlive else {
      keepAlive = .taking
      return .holdOpen
    }
    phase = .closed
    return .finish
  }

  /// The hold asked for by `.holdOpen` is taken. Returns `true` if the caller must release it
  /// at once (the group stopped needing it meanwhile).
  mutating func holdTaken() -> Bool {
    keepAlive = .held
    return releaseHoldIfUnneeded()
  }
}
