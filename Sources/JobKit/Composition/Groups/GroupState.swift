import Foundation

/// The state of one ``SequentialGroup`` or ``ConcurrentGroup``: which added tasks wait, which one
/// runs (sequential), how many of its source's tasks run, and whether the group still accepts
/// tasks. Kept under the job's lock (`JobGuarded`): each transition runs in the same critical
/// section as the job's state, which it is handed (`inout JobState`), and returns a ``Launch``
/// (or an outcome carrying one) the caller carries out after releasing the lock.
///
/// A task is tracked with the job only when it starts; until then it waits in `pending`.
///
/// **Add versus stop.** Every add is decided in one transition, under the job's lock, into an
/// outcome that guarantees the task finishes before the group does: before `main()` it waits in
/// `pending` (which the start takes or a stop drops, under the same lock); once the group runs
/// or stops, an add that hands a task out from another thread (`add`, a resume) takes a hold
/// on the job in the same transition (`JobState.holdOpen()`), so no way of finishing the job (a
/// cancel, a fail, a `.failFast` failure, the last task's routing) can finish it before the task
/// is tracked. Such a start counts as *in flight* until its task is tracked (`endInFlight`
/// releases its hold). A running group queues the task (or keeps it in `pending` until its
/// turn); a stopping group has the job track it, which cancels it and waits for it; a group
/// whose job finished (the hold is refused) or that closed rejects it, changing nothing. A stop
/// drops `pending` (the dropped tasks are cancelled and finish before the job can) and never
/// waits for anything else: the adds in flight hold the job themselves.
///
/// `allTasksFinished()` closes the group only when every task it handed out was routed, nothing
/// is in flight and no held task waits; with held tasks waiting it takes a hold on the job in
/// the same transition, which keeps the job from finishing until the group releases it. The
/// router decides to call `allTasksFinished()` before it does, so an add or a resume from
/// another thread can take its hold in between, hand a task out and have it tracked, all before
/// the call: the group then finds that task unrouted and stays open (the job, which tracks it,
/// does not finish either).
///
/// A transition that releases a hold sets its launch's `releasedHold`: the caller then asks the
/// job to drain (`allTasksFinished()` may be due).
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

  let mode: Mode
  private(set) var phase = Phase.waiting
  private(set) var context = JobContext()
  private(set) var stopsOnFailure = false
  private(set) var hold = Hold()
  /// Added and not started, oldest first. Not tracked with the job.
  private(set) var pending = Line<Operation>()
  /// Sequential only: the started task that has not been routed yet.
  private(set) var current: Operation?
  /// Every added task not routed or dropped yet, so adding one twice is caught.
  private(set) var members: Set<OperationKey> = []
  /// Starts from outside the job's callbacks whose task is not tracked yet (each holds the job).
  private(set) var inFlight = 0
  /// Whether the group holds its job open because held tasks wait (see `allTasksFinished`).
  private(set) var keepsJobOpen = false
  /// Waiting tasks the job's suspension suspended (`suspendWaiting()`), until a resume
  /// (`resumeWaiting()`), their start or a stop takes them.
  var suspendedWaiting: [OperationKey: ConcurrentOperation] = [:]
  /// `nil` for a group without a source.
  private(set) var source: SourceSlots?
  /// Whether a task that cancelled itself cancels the group (`GroupJob.propagatesTaskCancellation`).
  private(set) var propagatesTaskCancellation: Bool
  /// `GroupJob.onCancelled`, until the group finishes (see `GroupState+Cancellation`).
  var cancellationHandler = CancellationHandler.unset

  /// A group in `mode`; with a source if `sourceMaxRunning` is given (at least 1).
  init(mode: Mode, sourceMaxRunning: Int? = nil, propagatesTaskCancellation: Bool = false) {
    self.mode = mode
    source = sourceMaxRunning.map { SourceSlots(maxRunning: $0) }
    self.propagatesTaskCancellation = propagatesTaskCancellation
  }

  /// Whether tasks start as the mode says (`main()` ran, and no stop or finish came).
  var isRunning: Bool { phase == .running }

  /// The group's context is replaced. Returns the one replaced, for the caller to release after
  /// the lock (its values are the user's).
  mutating func replaceContext(with context: JobContext) -> JobContext {
    exchange(&self.context, with: context)
  }

  /// `SequentialGroup.stopsOnFailure` was set.
  mutating func setStopsOnFailure(_ stops: Bool) {
    stopsOnFailure = stops
  }

  /// `GroupJob.propagatesTaskCancellation` was set.
  mutating func setPropagatesTaskCancellation(_ propagates: Bool) {
    propagatesTaskCancellation = propagates
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
    /// The group is done, or its job finished: report, change nothing.
    case rejected
    /// The task is already in the group: report, ignore.
    case duplicate
  }

  /// `add(task)` from any thread, under the job's lock (`job`). Before `main()`, and while a
  /// task the add would wait behind runs or the group is held, the task waits in `pending`,
  /// which the group's callbacks, a resume or a stop take under this lock. Otherwise the task is
  /// handed out from this thread, in flight, under a hold on the job taken here.
  mutating func add(_ task: Operation, job: inout JobState) -> AddOutcome {
    switch phase {
    case .closed:
      return .rejected
    case .waiting:
      break
    case .running:
      if startsAtOnce {
        guard !members.contains(OperationKey(task)) else { return .duplicate }
        guard job.holdOpen() else { return .rejected }
      }
    case .stopping:
      guard !members.contains(OperationKey(task)) else { return .duplicate }
      guard job.holdOpen() else { return .rejected }
      members.insert(OperationKey(task))
      // Tracked with the stopping job, which cancels it, queues it and waits for it.
      inFlight += 1
      var result = launch(.one(task))
      result.inFlight = true
      return .accepted(result)
    }
    guard members.insert(OperationKey(task)).inserted else { return .duplicate }
    pending.append(task)
    return .accepted(startFromOutside(job: &job))
  }

  /// Starts what may start now, from a thread that is not running one of the job's callbacks:
  /// the start is in flight under a hold on the job (taken by the caller for an add, here for a
  /// resume). Returns an empty launch if the job finished.
  private mutating func startFromOutside(job: inout JobState) -> Launch {
    // Taken first: `launch(takeStartable())` would copy the whole state to call `launch`.
    let startable = takeStartable()
    var result = launch(startable)
    if !result.tasks.isEmpty {
      inFlight += 1
      result.inFlight = true
    } else {
      result.releasedHold = releaseJobIfUnneeded(&job)
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

  /// Releases the group's hold on the job if no held task waits any more. Returns whether it
  /// did (the caller then asks the job to drain).
  private mutating func releaseJobIfUnneeded(_ job: inout JobState) -> Bool {
    guard keepsJobOpen, !needsKeepAlive else { return false }
    keepsJobOpen = false
    job.releaseHold()
    return true
  }

  /// The tasks of an in-flight start are tracked: its hold on the job is released (and the
  /// group's own, if no held task waits any more). The caller then asks the job to drain.
  mutating func endInFlight(job: inout JobState) {
    inFlight -= 1
    job.releaseHold()
    _ = releaseJobIfUnneeded(&job)
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

  /// Holds or releases the group (from any thread, under the job's lock). A release that
  /// starts held tasks from this thread holds the job until they are tracked, as an add does;
  /// if the job finished (the hold is refused), nothing waits to start any more: nothing changes.
  mutating func setHold(_ isHeld: Bool, generation: UInt64, job: inout JobState) -> Launch {
    guard generation >= hold.generation else { return launch() }
    let previous = hold
    hold = Hold(isHeld: isHeld, generation: generation)
    if startsAtOnce, !pending.isEmpty, !job.holdOpen() {
      hold = previous
      return launch()
    }
    return startFromOutside(job: &job)
  }

  // MARK: Stopping and finishing

  /// The job is cancelled or failing (the caller holds the job, or its router): the waiting
  /// tasks are cancelled and never start their work, and finish before the job can. Adds in
  /// flight are not waited for here: each holds the job until its task is tracked. A group that
  /// is stopping already (a task cancelled itself, see `Routing.cancel`) drops its waiting
  /// tasks here too; a second stop finds none.
  mutating func stop(job: inout JobState) -> Launch {
    guard phase != .closed else { return launch() }
    phase = .stopping
    var result = dropPending()
    result.jobWaits = true
    result.releasedHold = releaseJobIfUnneeded(&job)
    return result
  }

  /// The job finished, however it ended: close, and drop any task still waiting (left over by a
  /// `.failFast` failure policy, which stops the job without a callback).
  mutating func jobFinished(job: inout JobState) -> Launch {
    phase = .closed
    var result = dropPending()
    result.releasedHold = releaseJobIfUnneeded(&job)
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
    /// A start is in flight (it holds the job), a task it handed out is tracked and not routed
    /// yet, or held tasks wait (the group took a hold on the job): the job therefore does not
    /// finish now, and `allTasksFinished()` is called again once the hold was released or the
    /// task was routed. Do nothing.
    case keepOpen
  }

  /// The job's `allTasksFinished()`, under the job's lock: close unless a task handed out is not
  /// routed yet (started from another thread after the router decided to call it, see the
  /// type's documentation), a start is in flight, or held tasks wait (then hold the job open).
  mutating func allTasksFinished(job: inout JobState) -> Completion {
    // `members` holds the waiting tasks and those handed out and not routed yet.
    guard inFlight == 0, members.count == pending.count else { return .keepOpen }
    guard !needsKeepAlive else {
      if !keepsJobOpen, job.holdOpen() {
        keepsJobOpen = true
      }
      return .keepOpen
    }
    phase = .closed
    return .finish
  }
}
