import Foundation

/// A waiting task that a transition of its job lets go, and what is done with it before it is
/// queued. Every transition that lets tasks go returns these: an admission line that opens or
/// takes its next turn, a freed slot, a token, a resume, a stop, routed dependencies. One
/// function carries them out after the lock, ``JobController/performExits(_:)``.
///
/// Made under the job's lock, because a node's fields are only stable there. In order, after
/// the lock: confirm the task's tracking for event listeners, hand it the job's shared context,
/// cancel it (a stop came first), skip it (a failed or stalled dependency: it finishes without
/// running), then send it where `destination` says.
struct TaskExit {
  /// Where the task goes once it was prepared.
  enum Destination: UInt8 {
    /// Add it to `queue` (or start it directly, see `enqueue`).
    case queue
    /// Ask its task type for a slot first (a limit, a rate limit, a suspension): the exits that
    /// do are taken to the job's lock together (`JobState.askForSlots`), those admitted queued.
    case slot
    /// Its job's stop cancelled it before it was ever queued: start it on this thread, so it
    /// finishes at once without running, or add it to `queue` if it is not ready.
    case startCancelled
    /// The caller queued it: start the gate, the Foundation dependency that holds it back
    /// (`dependencies.gate`).
    case gate
    /// Another job queues it, or it waits no more (dropped): nothing.
    case none
  }

  /// What a task tracked with `after:` learned from its dependencies: boxed, so that the exits
  /// of every other task stay small.
  final class Dependencies {
    enum Outcome {
      /// All were routed: the task is skipped if one of them failed or was cancelled.
      case routed
      /// Nothing could route `missing` (never tracked, or a cycle): reported, and the task skipped.
      case stalled(missing: [ObjectIdentifier])
      /// The task waits no more (it was routed or dropped): nothing to do.
      case dropped
    }

    /// The dependencies it named, released after the lock (the user's operations).
    let operations: [Operation]
    let outcome: Outcome
    let gate: Operation?

    init(_ operations: [Operation], _ outcome: Outcome, gate: Operation? = nil) {
      self.operations = operations
      self.outcome = outcome
      self.gate = gate
    }
  }

  let node: TaskNode
  let task: Operation
  let destination: Destination
  /// Where it is queued (`nil` for `gate` and `none`).
  let queue: OperationQueue?
  /// What the job hands every task leaving its admission line (a group's context), if any.
  let shared: AnyObject?
  /// Its dependencies' outcome, for a task tracked with `after:` (`nil` for any other).
  let dependencies: Dependencies?
  /// Events are listened to: the caller confirms the task's tracking (`taskTracked`, its start
  /// observed) before it is queued.
  let confirmsTracking: Bool
  /// The job stopped after the task was tracked and before it could wait: the caller cancels it
  /// before it is queued (the stop's own cancel runs on the stopping thread and may come later).
  let cancelsFirst: Bool
  /// It left its job's admission line: a full batch of such exits (``batchLimit``) is followed by
  /// the next one.
  let leftAdmissionLine: Bool
  /// One of the steps before the task is queued is due (see ``TaskExit``).
  let needsPreparing: Bool

  init(
    _ node: TaskNode, _ task: Operation, to destination: Destination, queue: OperationQueue?,
    shared: AnyObject? = nil, dependencies: Dependencies? = nil, confirmsTracking: Bool = false,
    cancelsFirst: Bool = false, leftAdmissionLine: Bool = false
  ) {
    self.node = node
    self.task = task
    self.destination = destination
    self.queue = queue
    self.shared = shared
    self.dependencies = dependencies
    self.confirmsTracking = confirmsTracking
    self.cancelsFirst = cancelsFirst
    self.leftAdmissionLine = leftAdmissionLine
    needsPreparing = confirmsTracking || shared != nil || cancelsFirst || dependencies != nil
  }

  /// At most how many tasks leave the admission line in one critical section when many may go
  /// at once (a concurrent group starting, a resume): so that 100,000 waiting tasks never hold
  /// all their exits at once.
  static let batchLimit = 256
}

// MARK: - Performing exits

extension JobController {
  /// Carries out `exits` with no lock held, in their order (see ``TaskExit``). Those that ask for
  /// a slot do so together in one more lock once all were prepared, and the admitted ones are
  /// queued. A full batch from the admission line is followed by the next, until it lets none go.
  func performExits(_ exits: [TaskExit]) {
    var batch = exits
    while !batch.isEmpty {
      var asksForSlots = false
      for exit in batch where performOne(exit) {
        asksForSlots = true
      }
      if asksForSlots {
        performExits(withJobState { $0.askForSlots(batch) })
      }
      guard batch.count >= TaskExit.batchLimit, batch[batch.count - 1].leftAdmissionLine else { return }
      batch = withJobState { $0.admissionExitsFromLine() }
    }
  }

  /// ``performExits(_:)`` for one exit (a sequential group's next task): no array.
  func performExit(_ exit: TaskExit) {
    if performOne(exit) {
      performExits(withJobState { $0.askForSlots([exit]) })
    }
  }

  /// Prepares `exit`'s task and sends it on. Returns `true` if it asks for a slot first. The
  /// common exit, nothing to prepare and queued at once, takes two tests.
  // Inlined: a sequential group's every step takes it (callgrind, grp-seq: 0.5% of a task).
  @inline(__always)
  private func performOne(_ exit: TaskExit) -> Bool {
    if exit.needsPreparing {
      prepare(exit)
    }
    if exit.destination == .queue, let queue = exit.queue {
      enqueue(exit.task, on: queue)
      return false
    }
    return sendOn(exit)
  }

  /// The steps before `exit`'s task is queued, in their order.
  // Inlined with `performOne`: a group's exits hand their context on every step (grp-seq, measured).
  @inline(__always)
  private func prepare(_ exit: TaskExit) {
    if exit.confirmsTracking {
      confirmTracked(exit.task, node: exit.node)
    }
    if exit.shared != nil {
      prepareForAdmission(exit.task, shared: exit.shared)
    }
    if exit.cancelsFirst {
      exit.task.cancel(handingDown: stopReason())
    }
    if let dependencies = exit.dependencies {
      skipIfDependenciesFailed(exit.task, dependencies)
    }
  }

  /// Sends on a prepared task that is not simply queued. Returns `true` if it asks for a slot.
  private func sendOn(_ exit: TaskExit) -> Bool {
    switch exit.destination {
    case .slot:
      return true
    case .startCancelled:
      if let queue = exit.queue {
        startWithoutRunning(exit.task, orQueueOn: queue)
      }
    case .gate:
      exit.dependencies?.gate?.start()
    case .queue, .none:
      break
    }
    return false
  }

  /// Skips `exit`'s task (it finishes at once, without running) if a dependency failed or was
  /// cancelled, or was never routed (reported). The dependencies' `isCancelled`, error and
  /// `name` are read here, with no lock held.
  private func skipIfDependenciesFailed(_ task: Operation, _ dependencies: TaskExit.Dependencies) {
    let skip: JobKitError
    switch dependencies.outcome {
    case .dropped:
      return
    case .routed:
      guard let failed = dependencies.operations.first(where: Self.hasFailed) else { return }
      skip = JobKitError(
        .dependencyFailed,
        message: "\(Self.label(of: task)) was skipped: its dependency \(Self.label(of: failed)) failed or was cancelled"
      )
    case .stalled(let keys):
      let missing = dependencies.operations.filter { keys.contains(ObjectIdentifier($0)) }
      let names = missing.map { Self.label(of: $0) }.joined(separator: ", ")
      reportMisuse(
        .dependencyNeverTracked,
        "\(Self.label(of: task)) waited for \(names), which this job never tracked or which wait in a cycle; skipped")
      skip = JobKitError(
        .dependencyFailed,
        message: "\(Self.label(of: task)) was skipped: its dependency \(names) was never routed by this job")
    }
    if let operation = task as? ConcurrentOperation {
      operation.skipForFailedDependency(skip)
    } else {
      task.cancel()
    }
  }

  /// Whether a finished and routed dependency failed or was cancelled.
  private static func hasFailed(_ dependency: Operation) -> Bool {
    if let operation = dependency as? ConcurrentOperation, operation.error != nil { return true }
    return dependency.isCancelled
  }

  /// An operation as a message names it: its `name`, or its type.
  private static func label(of operation: Operation) -> String {
    operation.name.map { "'\($0)'" } ?? "\(type(of: operation))"
  }

  /// Starts `task`, cancelled before it was ever queued, on this thread, so it finishes at once
  /// without running its work (a nested job's own stop then runs as a later step of this
  /// thread's stop trampoline, see `Trampoline`). One that is not ready yet goes to `queue`,
  /// which starts it once ready; one that runs or finished elsewhere is left alone.
  private func startWithoutRunning(_ task: Operation, orQueueOn queue: OperationQueue) {
    guard !task.isExecuting && !task.isFinished else { return }
    if task.isReady {
      task.start()
    } else {
      addToQueue(task, queue)
    }
  }
}

extension JobState {
  /// The exits that ask for a slot (``TaskExit/Destination/slot``), carried out already:
  /// each asks its task type now (`admitOrWait`). Returns those admitted, to be queued.
  mutating func askForSlots(_ exits: [TaskExit]) -> [TaskExit] {
    var admitted: [TaskExit] = []
    for exit in exits {
      guard exit.destination == .slot, let queue = exit.queue else { continue }
      if admitOrWait(exit.node, queue: queue) {
        admitted.append(TaskExit(exit.node, exit.task, to: .queue, queue: queue))
      }
    }
    return admitted
  }
}
