import Foundation

/// Inspecting a group (MGCommand's `commands`, `count` and `activeCommands`).
extension GroupJob {
  /// The tasks the group holds now: those it started and has not routed yet, in the order it
  /// started them, then those waiting for their turn, in the order they were added.
  ///
  /// A task leaves the list once the group routed it (its per-task callback ran), or when a
  /// cancel or a stop on failure dropped it before it started. Before the group starts, the list
  /// is every task added so far; after it finished, it is empty. Tasks of a group made with
  /// `init(taking:)` appear once pulled from the sequence, not before.
  ///
  /// A snapshot, read under the job's lock without asking any task anything: by the time you
  /// read it, tasks may have started, finished or been added on other threads, and a task being
  /// started at that very moment by another thread may be missing from it. Safe from any thread;
  /// O(number of tasks held).
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

  /// The started tasks (the job's) and the waiting ones (the group's), read in one critical
  /// section of the job's lock. A task being started at that moment (taken from the waiting
  /// tasks, not tracked yet) is in neither.
  private func taskSnapshot() -> (all: [Operation], running: [Operation]) {
    let (started, waiting) = withJobLock(groupState) { job, group in (job.trackedTasks(), group.pending.all) }
    var seen = Set<OperationKey>()
    var all: [Operation] = []
    all.reserveCapacity(started.count + waiting.count)
    var running: [Operation] = []
    for entry in started where seen.insert(OperationKey(entry.task)).inserted {
      all.append(entry.task)
      if !entry.hasFinished {
        running.append(entry.task)
      }
    }
    for task in waiting where seen.insert(OperationKey(task)).inserted {
      all.append(task)
    }
    return (all, running)
  }
}
