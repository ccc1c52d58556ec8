import Foundation

/// Suspension (``ConcurrentOperation/suspend()``) of a group's tasks that are not tracked yet:
/// those waiting for their turn are suspended and resumed with the job's tracked children
/// (`untrackedChildren(suspending:)`, in the class), and so is a task added while the group is
/// suspended.
extension GroupJob {
  /// `task` was added while the group is suspended: it is suspended too, as the tasks the group
  /// held when it was suspended, if it waits (remembered, so the resume or its start resumes it)
  /// or `launch` tracked it (the job's resume tells its tracked children). A resume that came
  /// meanwhile may have missed it: the group looks again after suspending it.
  func suspendIfSuspended(_ task: Operation, launch: GroupState.Launch) {
    guard let child = task as? ConcurrentOperation, isSuspended else { return }
    let tracked = !launch.cancelled && launch.tasks.contains { $0 === task }
    guard tracked || withGroupState({ $0.suspendWaiting(child) }) else { return }
    child.suspend()
    if !isSuspended {
      child.resume()
    }
  }
}
