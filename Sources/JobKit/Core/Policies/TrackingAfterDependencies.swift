import Foundation

/// Tracking with dependencies: a task that starts only after other tasks of the same job
/// finished and were routed (its state is in `JobState.admission`, a ``TaskDependencies``).
extension JobController {
  /// Tracks `task` and adds it to ``taskQueue`` once every one of `dependencies` finished and
  /// was routed by this job (its per-task callback returned); when it finishes, `completion` is
  /// called with it instead of ``taskFinished(_:)``, serially with the job's other callbacks.
  ///
  /// Dependencies are tasks this job tracks, before or after this call, so a graph can be built
  /// while it is discovered: a task may name a dependency that a later callback tracks. A
  /// limit (``setMaxConcurrentTasks(_:forGroup:)``) counts the task only once it is queued.
  ///
  /// - If a dependency failed (a ``ConcurrentOperation`` error, a timeout) or was cancelled,
  ///   `task` never runs: it is cancelled and queued, so it finishes at once, and is routed like
  ///   any cancelled task (`completion` gets it, `isCancelled`). A task tracked for its result
  ///   (`trackAndQueue(resultOf:after:completion:)`) gets `.failure(JobKitError)` with the code
  ///   ``JobKitError/Code/dependencyFailed`` naming the dependency (its `name`, or its type). Its own dependants are skipped in turn. The failed dependency itself counts
  ///   for the ``failurePolicy`` like any failure; a skipped task does not.
  /// - If nothing can make progress while tasks still wait (`main()` returned, and every task
  ///   the job has not routed waits for a dependency: one it never tracked, or a cycle), those
  ///   tasks are skipped the same way (a task tracked for its result gets
  ///   ``JobKitError/Code/dependencyFailed``), and the job reports each skipped task to its
  ///   misuse handler (and ``ConcurrentOperation/misuses``) as
  ///   ``JobKitError/Code/dependencyNeverTracked``. So track a dependency before the job has
  ///   nothing else to do: from `main()` or a callback, not from `allTasksFinished()`.
  /// - A dependency that had finished before this job first tracked a task with dependencies
  ///   counts as routed.
  ///
  /// A job that never names dependencies pays nothing for them; one that does keeps a weak
  /// record of each task it routed since, until it is freed.
  public func trackAndQueue<T: Operation>(
    _ task: T, after dependencies: [Operation], completion: @escaping @Sendable (T) -> Void
  ) {
    let node = TaskNodeWithCompletion(job: self, task: task, completion: completion)
    track(task, node: node, after: dependencies, target: .queue(queueOfTasks))
  }

  /// Tracks `task`, which the caller adds to a queue (or starts) itself, after this call: the
  /// task is not ready until every one of `dependencies` finished and was routed by this job (a
  /// Foundation dependency the job owns holds it back). Otherwise as
  /// ``trackAndQueue(_:after:completion:)``: a failed or cancelled dependency cancels it, so it
  /// finishes at once without running.
  public func track<T: Operation>(
    _ task: T, after dependencies: [Operation], completion: @escaping @Sendable (T) -> Void
  ) {
    let gate = BlockOperation()
    // Added before the task can be queued or the gate started: no race with the gate's finish.
    task.addDependency(gate)
    let node = TaskNodeWithCompletion(job: self, task: task, completion: completion)
    if !track(task, node: node, after: dependencies, target: .gate(gate)) {
      task.removeDependency(gate)
    }
  }

  /// Tracks `task` as waiting for `dependencies`. Returns whether it was tracked.
  @discardableResult
  private func track(
    _ task: Operation, node: TaskNode, after dependencies: [Operation], target: DependencyWait.Target
  ) -> Bool {
    var queue: OperationQueue?
    if case .queue(let taskQueue) = target { queue = taskQueue }
    var notes = TrackingNotes()
    guard
      let node = track(
        task, node: node, queue: queue, replacing: nil, waitsForDependencies: true, notes: &notes)
    else { return false }
    // Read with a window open (the job remembers what it routes meanwhile): a dependency not
    // finished now is tracked (and routed later, or meanwhile) or not tracked yet.
    let window = withJobState { $0.openDependencyWindow() }
    let named = dependencies.map { dependency in
      TaskDependencies<TaskNode, DependencyWait>.Named(
        key: ObjectIdentifier(dependency), object: dependency, finishedBefore: dependency.isFinished)
    }
    let wait = DependencyWait(task: task, dependencies: dependencies, target: notes.mayQueue ? target : .none)
    if let exit = withJobState({ $0.waitForDependencies(node, named, wait, window: window) }) {
      performExit(exit)
    }
    return true
  }
}
