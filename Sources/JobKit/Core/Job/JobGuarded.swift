import Foundation

/// A subclass's own state kept under its job's lock, so that the job has one lock: reachable
/// only through ``JobController/withJobLock(_:_:)``, which hands a transition the job's state
/// and this value in one critical section. A floor above stores its machine here (a group's
/// stop rules and source slots) instead of behind a lock of its own.
final class JobGuarded<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched under the owning job's lock.
  fileprivate var value: Value

  init(_ value: Value) {
    self.value = value
  }
}

extension JobController {
  /// Applies `transition` to the job's state and `guarded` (a value of this job's) under the
  /// job's lock, through the job's door (``JobController/withJobState(_:)``): what the job's
  /// state left to do after it is done after the lock, as for any transition. Inlined: out of
  /// line, a group's transition closure would retain what it captures (per routed task).
  @inline(__always)  // Measured: out of line, grp-seq +1.3%, grp-co +0.8% (Benchmarks/README.md).
  func withJobLock<Value, Result>(
    _ guarded: JobGuarded<Value>, _ transition: (inout JobState, inout Value) -> Result
  ) -> Result {
    withJobState { state in transition(&state, &guarded.value) }
  }
}

extension JobState {
  /// The tasks the job tracks and has not routed yet, oldest tracked first, each with whether
  /// its finish was observed (it then waits to be routed). For inspection by the floors above
  /// (a group listing its tasks, in the same critical section as the tasks it keeps waiting):
  /// reads only the job's own bookkeeping, never a task's `isExecuting` or `isFinished`.
  func trackedTasks() -> [(task: Operation, hasFinished: Bool)] {
    var tasks: [(task: Operation, hasFinished: Bool)] = []
    tasks.reserveCapacity(registry.count)
    for node in registry.nodes {
      if let task = node.task {
        tasks.append((task, node.state.isFinished))
      }
    }
    tasks.reverse()
    return tasks
  }
}
