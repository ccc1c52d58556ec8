import Foundation

/// What a task tracked with dependencies carries while it waits: the task, its dependencies
/// (to read their outcomes once they were routed, and to name them) and where it goes then.
struct DependencyWait {
  enum Target {
    /// The job queues it on `queue` (through its group's limit and the job's suspension).
    case queue(OperationQueue)
    /// The caller queued it; it is not ready until `gate`, one of its Foundation dependencies,
    /// is started by the job.
    case gate(Operation)
    /// Another job queues it: nothing to do but skip it if a dependency failed.
    case none
  }

  let task: Operation
  let dependencies: [Operation]
  let target: Target
}

extension TaskExit {
  /// The exit of a task its dependencies let go: it goes where it waited to go, skipped after
  /// the lock if a dependency failed or was never routed; one that waits no more goes nowhere.
  init(_ release: JobAdmission.DependencyWaitEnd) {
    let wait = release.payload
    var destination = Destination.none
    var queue: OperationQueue?
    var gate: Operation?
    switch wait.target {
    case .queue(let target):
      destination = .slot
      queue = target
    case .gate(let target):
      destination = .gate
      gate = target
    case .none:
      break
    }
    let outcome: Dependencies.Outcome
    switch release.reason {
    case .ready:
      outcome = .routed
    case .stalled(let missing):
      outcome = .stalled(missing: missing)
    case .dropped:
      outcome = .dropped
      destination = .none
    }
    self.init(
      release.node, wait.task, to: destination, queue: queue,
      dependencies: Dependencies(wait.dependencies, outcome, gate: gate))
  }
}

/// Dependencies between a job's tasks (see ``TaskDependencies``): a task waiting for its
/// dependencies is not admitted or queued until each was routed; a routed task releases its
/// dependants; when nothing can route the rest, they are released as stalled.
extension JobState {
  /// `node` was tracked as `task`: index it if dependencies are in use (`activating`: the task
  /// names dependencies, so they are from now on).
  mutating func indexForDependencies(_ node: TaskNode, _ task: Operation, activating: Bool) {
    if activating, !admission.usesDependencies {
      admission.activateDependencies(
        unrouted: registry.nodes.lazy.compactMap { node in node.task.map { (ObjectIdentifier($0), node) } })
    }
    admission.trackedForDependencies(node, as: ObjectIdentifier(task))
  }

  /// A task tracked with `waitsForDependencies` is about to read whether its dependencies
  /// finished: the job remembers what it routes until ``waitForDependencies(_:_:_:window:)``.
  mutating func openDependencyWindow() -> UInt64 {
    admission.openDependencyWindow()
  }

  /// `node`, tracked with `waitsForDependencies`, is observed now: it waits for `named` (the
  /// dependencies of `wait`), or is released at once if none is left to wait for. A task no
  /// longer unfinished (it had finished before it was tracked) waits for nothing: released as
  /// dropped. Either way `window` (from ``openDependencyWindow()``) closes.
  mutating func waitForDependencies(
    _ node: TaskNode, _ named: [TaskDependencies<TaskNode, DependencyWait>.Named], _ wait: DependencyWait,
    window: UInt64
  ) -> TaskExit? {
    guard node.state.isUnfinished else {
      admission.closeDependencyWindow(window)
      return TaskExit(
        node, wait.task, to: .none, queue: nil, dependencies: TaskExit.Dependencies(wait.dependencies, .dropped))
    }
    var queue: OperationQueue?
    if case .queue(let target) = wait.target { queue = target }
    return admission.waitForDependencies(node, named, wait, queue: queue, window: window).map(exit)
  }

  /// The exits of the tasks that routed tasks released since the last call (usually none).
  mutating func takeDependencyExits() -> [TaskExit] {
    admission.takeDependencyWaitEnds().map(exit)
  }

  /// The exit of a task its dependencies let go: a task the job queues waits for them no more.
  private func exit(_ release: JobAdmission.DependencyWaitEnd) -> TaskExit {
    _ = release.node.stopWaiting(for: .dependencies)
    return TaskExit(release)
  }

  /// `node` is dropped without being routed (a duplicate, a replaced attempt): it is no longer
  /// indexed, nor waits.
  mutating func forgetForDependencies(_ node: TaskNode) {
    guard admission.usesDependencies, let task = node.task else { return }
    admission.forgotForDependencies(node, as: ObjectIdentifier(task))
  }

  /// The job has nothing else to do (`nextStep`, with tasks still tracked): if they all wait for
  /// dependencies, gives up on them (they are released as stalled, for the drainer to skip).
  mutating func stallIfNothingCanProgress() -> Step {
    if isStalled {
      admission.stallDependencies()
    }
    return .none
  }

  /// Nothing can make progress while tasks still wait for dependencies: `main()` returned, no
  /// hold is out (nobody will track from outside), and every task the job tracks and has not
  /// routed waits for dependencies (none runs or waits to be routed, so none will be routed).
  var isStalled: Bool {
    let waiting = admission.waitingForDependencies
    return waiting > 0 && waiting == registry.count && phase.hasMainReturned
  }
}
