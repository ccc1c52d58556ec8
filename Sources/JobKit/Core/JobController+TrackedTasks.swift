import Foundation

extension JobController {
  /// The tasks the job tracks and has not routed yet, oldest tracked first, each with whether
  /// its finish was observed (it then waits to be routed). For inspection by the floors above
  /// (a group listing its tasks): the references are copied out under the job's lock, which
  /// reads only the job's own bookkeeping, never a task's `isExecuting` or `isFinished`.
  /// A snapshot: tasks tracked, finished or routed meanwhile on other threads are not reflected.
  func trackedTaskSnapshot() -> [(task: Operation, hasFinished: Bool)] {
    var newestFirst = jobState.withLock { state in
      var tasks: [(task: Operation, hasFinished: Bool)] = []
      tasks.reserveCapacity(state.registry.count)
      for node in state.registry.nodes {
        if let task = node.task {
          tasks.append((task, node.isSignalled))
        }
      }
      return tasks
    }
    newestFirst.reverse()
    return newestFirst
  }
}
