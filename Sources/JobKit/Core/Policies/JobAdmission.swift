import Foundation

/// A job's admission policy: which of the tasks tracked to wait for it
/// (`JobController.trackForAdmission`, a group's added tasks) may go on to their queue now, in
/// the order they entered its line. Owned by `JobState` as `admission`; inactive, and free, for
/// a job that never configured it (one Bool read per finish that left a line).
///
/// - `all` (a concurrent group): every task, once the admission is open;
/// - `oneAtATime` (a sequential group): the next only once the one before it is `done`.
///
/// Closed until the job's `main()` opens it, paused from outside (`setPaused`, each change with
/// a generation, so a stale change arriving late is dropped), or blocked (a source that comes
/// first). A stop lets every waiting task go at once, cancelled (they finish without running),
/// and a task that enters while the job stops goes at once too. Once it leaves the line, a task
/// asks its group for a slot (`admitOrWait`: limits, a suspension) as any job-queued task does.
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
  /// Waiting tasks, oldest first; each one's slot is `.admission(queue)`.
  private var line = Line<TaskNode>()
  /// What every task leaving the line is handed before it is queued (a group's context), by
  /// `JobController.prepareForAdmission`.
  private(set) var shared: AnyObject?

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

  /// `node` (unfinished, observed, its slot `.admission`) enters: returns `true` if it leaves
  /// at once (and takes the turn), else it waits in line. While the job stops, every task
  /// leaves at once.
  mutating func enter(_ node: TaskNode, stopping: Bool) -> Bool {
    if stopping || (line.isEmpty && admitsNext) {
      if !stopping { takeTurn(node) }
      _ = node.leaveAdmission()
      return true
    }
    line.append(node)
    return false
  }

  private mutating func takeTurn(_ node: TaskNode) {
    if order == .oneAtATime {
      current = ObjectIdentifier(node.operation)
    }
  }

  /// The next task that may leave the line now, with its queue; `nil` if none may.
  mutating func next() -> (node: TaskNode, queue: OperationQueue)? {
    // Every node in line waits: a node that finishes meanwhile leaves it (`leave`).
    while admitsNext, let node = line.popFirst() {
      guard let queue = node.leaveAdmission() else { continue }
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

  /// How many tasks wait in line.
  var waitingCount: Int { line.count }

  /// How many tasks can leave the line in the next batch (all of a batch, one at a time, or
  /// none while the admission admits nothing): the capacity to reserve for their exits.
  var exitCapacityHint: Int {
    guard admitsNext else { return 0 }
    return min(line.count, order == .all ? TaskExit.batchLimit : 1)
  }

  mutating func setBlocked(_ blocked: Bool) {
    isBlocked = blocked
  }

  /// The job stops: every waiting task leaves, oldest first.
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

  /// `node` finished (or its attempt failed) while in line, queued by someone else (misuse):
  /// it leaves the line, while the caller still holds it (so nothing is released here).
  mutating func leave(_ node: TaskNode) {
    line.removeFirst { $0 === node }
  }
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
    guard node.state.isWaitingForAdmission else { return nil }
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
    for node in registry.nodes where node.state.isWaitingForAdmission {
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

extension TaskState {
  /// The unfinished task, without a slot, waits in its job's admission line for `queue`.
  mutating func waitForAdmission(on queue: OperationQueue) {
    guard case .unfinished(.none, let timeout) = self else { return }
    self = .unfinished(slot: .admission(queue), timeout: timeout)
  }

  /// The task leaves its job's admission line. Returns its queue, or `nil` (and changes
  /// nothing) if it no longer waits there.
  mutating func leaveAdmission() -> OperationQueue? {
    guard case .unfinished(.admission(let queue), let timeout) = self else { return nil }
    self = .unfinished(slot: .none, timeout: timeout)
    return queue
  }

  var isWaitingForAdmission: Bool {
    if case .unfinished(.admission, _) = self { return true }
    return false
  }
}
