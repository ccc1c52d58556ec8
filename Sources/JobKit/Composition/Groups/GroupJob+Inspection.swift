import Foundation

/// Inspecting a group (MGCommand's `commands`, `count` and `activeCommands`).
extension GroupJob {
  /// The tasks the group holds now: those it started and has not routed yet, in the order they
  /// were added, then those waiting for their turn, in the order they were added.
  ///
  /// A task leaves the list once the group routed it (its per-task callback ran, or was skipped
  /// because the group stopped: a task a cancel or a stop on failure dropped before it started
  /// leaves once it finished without running). Before the group starts, the list is every task
  /// added so far; after it finished, it is empty. Tasks of a group made with `init(taking:)`
  /// appear once pulled from the sequence, not before.
  ///
  /// A snapshot, read under the job's lock without asking any task anything: by the time you
  /// read it, tasks may have started, finished or been added on other threads. Safe from any
  /// thread; O(number of tasks held).
  public var tasks: [Operation] {
    taskSnapshot().all
  }

  /// How many tasks the group holds now (``tasks``'s count; the same snapshot rules apply).
  public var taskCount: Int {
    tasks.count
  }

  /// The tasks the group started (handed to its ``JobController/taskQueue``) whose finish it has
  /// not seen yet, in the order it started them. A task listed may still wait for a free slot
  /// (of the queue, or of a limit set with ``JobController/setMaxConcurrentTasks(_:forGroup:)``),
  /// for a dependency, or for the ``ConcurrentOperation/resume()`` of a suspended group; a task
  /// that finished and waits to be routed is not listed.
  ///
  /// A snapshot, as for ``tasks``: it is decided from the group's own bookkeeping (which tasks it
  /// started, which finished), not by asking the tasks' `isExecuting`, so it may be stale as soon
  /// as it is returned. Safe from any thread.
  public var runningTasks: [Operation] {
    taskSnapshot().running
  }

  /// The started tasks and the waiting ones (all tracked by the job, the waiting ones in its
  /// admission line), read in one critical section of the job's lock.
  private func taskSnapshot() -> (all: [Operation], running: [Operation]) {
    let (tracked, waiting) = readJobState { ($0.trackedTasks(), $0.tasksWaitingForAdmission) }
    let waitingKeys = Set(waiting.map(OperationKey.init))
    var all: [Operation] = []
    all.reserveCapacity(tracked.count)
    var running: [Operation] = []
    for entry in tracked where !waitingKeys.contains(OperationKey(entry.task)) {
      all.append(entry.task)
      if !entry.hasFinished {
        running.append(entry.task)
      }
    }
    all += waiting
    return (all, running)
  }
}
