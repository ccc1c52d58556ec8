import Foundation

/// How a job finishes: its error, the progress to publish the final counts to first, and the
/// stop's grace-period timer to cancel. It also carries the job's dropped groups out of the lock:
/// their handlers may hold the last reference to a user's object, whose `deinit` must not run
/// under the lock.
struct JobFinish {
  let error: (any Error)?
  /// A cancel stopped the job (it finishes without an error and `isCancelled`).
  var cancelled = false
  var publish: Progress?
  var graceTimer: (any JobTimer)? = nil
  var droppedGroups: [TaskGroupEntry] = []
}
