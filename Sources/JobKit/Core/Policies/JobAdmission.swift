import Foundation

/// A job's admission: every task it tracked that waits before its queue, in one value, each in
/// the line of what it waits for now (its state's slot, read as `Slot.waiting`):
///
/// - `turn`: tracked to wait for the job's admission (`trackForAdmission`, a group's added tasks),
///   in one line, let go in `order` once open (`main()` began), not paused, not blocked;
/// - `resume`: held while the job is suspended, in the order they came;
/// - `slot`: one line per task type with a limit or a rate limit, each its own FIFO, found by
///   the type entry's `slotLine` index: a freed slot visits only its own type's line;
/// - `dependencies`: tracked with `after:`, until their dependencies were routed
///   (``TaskDependencies``, indexed by node and by dependency).
///
/// A task leaving one line asks for the next condition (`admitOrWait`). A stop lets the turn
/// line go at once, cancelled; a task leaving the slot line of a stopped job still needs a slot.
/// Inactive, and free, for a job that never uses it. Fields private; changed only by the job's
/// transitions under its lock.
struct JobAdmission {
  enum Order {
    case all
    case oneAtATime
  }

  private(set) var isActive = false
  private var order = Order.all
  private var isOpen = false
  /// Follows the pause of whoever holds the job (a command queue), see `setPaused`.
  private var pause = StampedFlag()
  private var isBlocked = false
  /// `oneAtATime`: the task that left the line and is not done yet.
  private var current: ObjectIdentifier?
  /// Tasks waiting for their turn, oldest first.
  private var turnLine = Line<TaskNode>()
  /// Tasks waiting for the resume, in the order they came (a finished one stays until the resume
  /// drops it).
  private var resumeLine: [TaskNode] = []
  /// Tasks waiting for a slot, one line per task type, at its entry's `slotLine`.
  private var slotLines: [Line<TaskNode>] = []
  /// Tasks waiting for their dependencies, and the index of the job's unrouted tasks they need
  /// (inactive, and free, until a task names dependencies).
  private var dependencies = TaskDependencies<TaskNode, DependencyWait>()
  /// What every task leaving the line is handed before it is queued (a group's context), by
  /// `JobController.prepareForAdmission`.
  private(set) var shared: AnyObject?
  #if DEBUG
    /// How many waiting nodes the slot lines were asked for (tests: a freed slot visits its own
    /// type's line only).
    private(set) var slotVisits = 0
  #endif

  /// Replaces `shared`. Returns the one replaced, for the caller to release after the lock.
  mutating func replaceShared(with object: AnyObject?) -> AnyObject? {
    exchange(&shared, with: object)
  }

  /// Admits in `order` from now on; `blocked` until `setBlocked(false)`.
  mutating func activate(_ order: Order, blocked: Bool) {
    isActive = true
    self.order = order
    isBlocked = blocked
  }

  /// Whether the next task in line may leave it now.
  private var admitsNext: Bool {
    guard isOpen, !pause.isSet, !isBlocked else { return false }
    return order == .all || current == nil
  }

  /// `node` (unfinished, observed, waiting for its turn) enters: returns `true` if it leaves at
  /// once (and takes the turn), else it waits in line. While the job stops, every task leaves at
  /// once.
  mutating func enter(_ node: TaskNode, stopping: Bool) -> Bool {
    if stopping || (turnLine.isEmpty && admitsNext) {
      if !stopping { takeTurn(node) }
      _ = node.stopWaiting(for: .turn)
      return true
    }
    turnLine.append(node)
    return false
  }

  private mutating func takeTurn(_ node: TaskNode) {
    if order == .oneAtATime {
      current = ObjectIdentifier(node.operation)
    }
  }

  /// The next task that may leave the turn line now, with its queue; `nil` if none may.
  mutating func next() -> (node: TaskNode, queue: OperationQueue)? {
    // Every node in line waits: a node that finishes meanwhile leaves it (`leave`).
    while admitsNext, let node = turnLine.popFirst() {
      guard let queue = node.stopWaiting(for: .turn) else { continue }
      takeTurn(node)
      return (node, queue)
    }
    return nil
  }

  /// The job's `main()` begins.
  mutating func open() {
    isOpen = true
  }

  /// `task`, admitted in its turn, is done (its per-task callback runs): the next may go.
  /// Returns whether the turn was `task`'s.
  mutating func done(_ task: Operation) -> Bool {
    guard current == ObjectIdentifier(task) else { return false }
    current = nil
    return true
  }

  /// Pauses or goes on (change number `generation`; an older one than applied is dropped).
  mutating func setPaused(_ paused: Bool, generation: UInt64) {
    _ = pause.follow(paused, generation: generation)
  }

  /// How many tasks wait for their turn.
  var waitingForTurn: Int { turnLine.count }

  /// How many tasks can leave the turn line in the next batch (all of a batch, one at a time,
  /// or none while the admission admits nothing): the capacity to reserve for their exits.
  var exitCapacityHint: Int {
    guard admitsNext else { return 0 }
    return min(turnLine.count, order == .all ? TaskExit.batchLimit : 1)
  }

  mutating func setBlocked(_ blocked: Bool) {
    isBlocked = blocked
  }

  /// The job stops: every task waiting for its turn leaves, oldest first.
  mutating func releaseAll() -> [(node: TaskNode, queue: OperationQueue)] {
    isOpen = true
    pause.clearQuietly()
    isBlocked = false
    order = .all
    var released: [(node: TaskNode, queue: OperationQueue)] = []
    while let next = next() {
      released.append(next)
    }
    return released
  }

  /// `node` finished (or its attempt failed) while waiting for its turn or a slot, queued by
  /// someone else (misuse): it leaves that line, while the caller still holds it (so nothing is
  /// released here). Linear in the line's length; only in that misuse.
  mutating func leave(_ node: TaskNode, _ need: TaskState.Need) {
    switch need {
    case .turn:
      turnLine.removeFirst { $0 === node }
    case .slot:
      guard let index = node.typeEntry.slotLine else { return }
      slotLines[index].removeFirst { $0 === node }
    case .resume, .dependencies:
      break  // dropped at the resume, or as it is routed
    }
  }

  // MARK: The resume line

  /// `node` (unfinished, observed, without a slot) waits for the resume, to go to `queue`.
  mutating func waitForResume(_ node: TaskNode, for queue: OperationQueue) {
    if node.wait(for: .resume, on: queue) {
      resumeLine.append(node)
    }
  }

  /// How many tasks wait for the resume (finished ones not dropped yet included).
  var waitingForResume: Int { resumeLine.count }

  /// The resume (or a stop): every task that waited for it, in the order they came; each one's
  /// state says whether it still waits.
  mutating func takeResumeLine() -> [TaskNode] {
    exchange(&resumeLine, with: [])
  }

  // MARK: The slot lines

  /// How many tasks of `group` wait for a slot.
  func waitingForSlot(of group: TaskTypeEntry) -> Int {
    guard let index = group.slotLine else { return 0 }
    return slotLines[index].count
  }

  /// `node` (unfinished, observed, without a slot) waits in `group`'s line, to go to `queue`
  /// once it gets a slot.
  mutating func waitForSlot(_ node: TaskNode, of group: TaskTypeEntry, for queue: OperationQueue) {
    guard node.wait(for: .slot, on: queue) else { return }
    guard let index = group.slotLine else {
      group.joinSlotLine(slotLines.count)
      slotLines.append(Line())
      slotLines[slotLines.count - 1].append(node)
      return
    }
    slotLines[index].append(node)
  }

  /// Gives `group`'s free slots (and tokens) to its waiting tasks, in order. Returns the
  /// admitted ones, with their queues. Visits `group`'s line only.
  mutating func admitWaiting(of group: TaskTypeEntry) -> [(node: TaskNode, queue: OperationQueue)] {
    guard let index = group.slotLine else { return [] }
    var admitted: [(node: TaskNode, queue: OperationQueue)] = []
    // Every task in the line waits: a task that stops waiting otherwise leaves it (`leave`).
    while group.hasRoom, let node = slotLines[index].popFirst() {
      #if DEBUG
        slotVisits += 1
      #endif
      guard let queue = node.admitFromLine() else {
        assertionFailure("a task in its group's line no longer waits for a slot")
        continue
      }
      group.admitted()
      admitted.append((node, queue))
    }
    return admitted
  }

  // MARK: Waiting for dependencies (see `TaskDependencies`, whose transitions these forward to)

  /// A task that waits for its dependencies no more, and why.
  typealias DependencyWaitEnd = TaskDependencies<TaskNode, DependencyWait>.Release

  /// Whether the job has used dependencies (until then, routing pays one `Bool` read for them).
  var usesDependencies: Bool { dependencies.isActive }
  var waitingForDependencies: Int { dependencies.waitingCount }
  /// Whether routed tasks ended waits that the caller has not taken yet.
  var hasDependencyWaitEnds: Bool { dependencies.hasReleased }
  /// How many routed tasks are remembered for open windows (see `TaskDependencies`).
  var dependencyRecordCount: Int { dependencies.routedRecordCount }

  mutating func activateDependencies(unrouted tasks: some Sequence<(key: ObjectIdentifier, node: TaskNode)>) {
    dependencies.activate(unrouted: tasks)
  }

  mutating func trackedForDependencies(_ node: TaskNode, as key: ObjectIdentifier) {
    dependencies.tracked(node, as: key)
  }

  mutating func forgotForDependencies(_ node: TaskNode, as key: ObjectIdentifier) {
    dependencies.forgot(node, as: key)
  }

  mutating func openDependencyWindow() -> UInt64 { dependencies.openWindow() }

  mutating func closeDependencyWindow(_ window: UInt64) { dependencies.closeWindow(window) }

  /// `node` waits for `named` (to go to `queue`, if the job queues it), or is released at once.
  mutating func waitForDependencies(
    _ node: TaskNode, _ named: [TaskDependencies<TaskNode, DependencyWait>.Named], _ wait: DependencyWait,
    queue: OperationQueue?, window: UInt64
  ) -> DependencyWaitEnd? {
    if let queue {
      node.wait(for: .dependencies, on: queue)
    }
    return dependencies.wait(node, for: named, payload: wait, window: window)
  }

  mutating func routedForDependencies(_ node: TaskNode, as key: ObjectIdentifier, object: AnyObject) {
    dependencies.routed(node, as: key, object: object)
  }

  mutating func stallDependencies() { dependencies.stall() }

  mutating func takeDependencyWaitEnds() -> [DependencyWaitEnd] { dependencies.takeReleased() }
}

extension JobState {
  /// Makes the job admit the tasks tracked for admission in `order` (before it is shared).
  mutating func activateAdmission(_ order: JobAdmission.Order, blocked: Bool = false) {
    admission.activate(order, blocked: blocked)
  }

  /// `node`, tracked for admission and observed now, enters the admission line. Returns its
  /// exit if it leaves at once.
  mutating func enterAdmission(_ node: TaskNode, queue: OperationQueue) -> TaskExit? {
    // This job claimed the task's queueing (`track` lets only that job's node enter): a job freed
    // before it let the task go gives the claim back (`TaskNode.detach(from:)`).
    node.claimQueueForAdmission()
    guard node.state.waits(for: .turn) else { return nil }
    let stopping = phase.isStopping
    guard admission.enter(node, stopping: stopping) else { return nil }
    return exit(node, queue, cancelsFirst: stopping)
  }

  /// The job's `main()` begins: the tasks that may go now leave the line (a first batch, see
  /// `admissionExitsFromLine`).
  mutating func openAdmission() -> [TaskExit] {
    admission.open()
    return admissionExitsFromLine()
  }

  /// `task`'s turn is over (see `JobAdmission.done`, one at a time): the next task, if any,
  /// leaves the line.
  mutating func admissionDone(_ task: Operation) -> TaskExit? {
    guard admission.done(task), let (node, queue) = admission.next() else { return nil }
    return exit(node, queue)
  }

  /// Pauses or resumes the admission (see `JobAdmission.setPaused`); a first batch of the tasks
  /// that may go now.
  mutating func setAdmissionPaused(_ paused: Bool, generation: UInt64) -> [TaskExit] {
    admission.setPaused(paused, generation: generation)
    return admissionExitsFromLine()
  }

  /// Blocks or unblocks the admission (a source that comes first); a first batch of the tasks
  /// that may go now.
  mutating func setAdmissionBlocked(_ blocked: Bool) -> [TaskExit] {
    admission.setBlocked(blocked)
    return admissionExitsFromLine()
  }

  /// The tasks waiting in the admission line now, oldest first (for inspection).
  var tasksWaitingForAdmission: [Operation] {
    var tasks: [Operation] = []
    for node in registry.nodes where node.state.waits(for: .turn) {
      if let task = node.task { tasks.append(task) }
    }
    tasks.reverse()
    return tasks
  }

  /// A stop lets every waiting task go (cancelled by the same stop): each asks its group for a
  /// slot. Returns the exits of those admitted, to start after the cancels.
  mutating func releaseAdmissionForStop() -> [TaskExit] {
    guard admission.isActive else { return [] }
    var admitted: [TaskExit] = []
    for (node, queue) in admission.releaseAll() {
      keepJobIfIdle(node)
      if admitOrWait(node, queue: queue), let task = node.task {
        admitted.append(TaskExit(node, task, to: .startCancelled, queue: queue))
      }
    }
    return admitted
  }

  /// The tasks that may leave the line now, oldest first, at most `TaskExit.batchLimit` of
  /// them: a caller that got a full batch asks for the next one (`admissionExitsFromLine`) once
  /// it carried this one out, so a group of 100,000 waiting tasks never holds all their exits at
  /// once.
  mutating func admissionExitsFromLine() -> [TaskExit] {
    var exits: [TaskExit] = []
    exits.reserveCapacity(admission.exitCapacityHint)
    while exits.count < TaskExit.batchLimit, let (node, queue) = admission.next() {
      if let exit = exit(node, queue) { exits.append(exit) }
    }
    return exits
  }

  private mutating func exit(_ node: TaskNode, _ queue: OperationQueue, cancelsFirst: Bool = false)
    -> TaskExit?
  {
    guard let task = node.task else { return nil }
    keepJobIfIdle(node)
    let group: TaskTypeEntry = node.typeEntry
    let ready = !suspension.isSuspended && group.limit == nil && group.rate == nil
    // For events, a task waiting for admission is tracked when it leaves the line: a group's
    // tasks, added before anyone could listen, are seen once they start.
    let confirmsTracking = !listeners.isEmpty && node.timing == nil
    if confirmsTracking {
      // Before the task can start or finish: it is queued only after this lock.
      node.time(with: TaskTiming())
    }
    return TaskExit(
      node, task, to: ready ? .queue : .slot, queue: queue, shared: admission.shared,
      confirmsTracking: confirmsTracking,
      cancelsFirst: cancelsFirst, leftAdmissionLine: true)
  }
}

extension JobState {
  /// `node` leaves the admission line before the job started (a stop, or an admission opened
  /// from outside): its task may now run and finish without the job's doing, so it keeps the
  /// job until it finished (`JobKeeper`), as a task tracked for its caller to queue does.
  fileprivate mutating func keepJobIfIdle(_ node: TaskNode) {
    if phase.isIdle {
      keeper.keep(for: node)
    }
  }
}
