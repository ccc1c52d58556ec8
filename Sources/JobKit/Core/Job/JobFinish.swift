import Foundation

/// How a job finishes: its error, whether (and why) a stop ended it early, and the stop's grace-period timer
/// to cancel. It also carries the job's dropped groups out of the lock: their handlers may hold
/// the last reference to a user's object, whose `deinit` must not run under the lock. A class,
/// made once per job, so that the drainer's batches stay small.
final class JobFinish {
  let error: (any Error)?
  /// Why the job stopped early, if it did.
  let stop: JobStop?
  let graceTimer: (any JobTimer)?
  /// The armed timer of the job's time limit, to cancel.
  let timeLimitTimer: (any JobTimer)?
  let droppedGroups: [TaskTypeEntry]

  init(
    error: (any Error)?, stop: JobStop? = nil, graceTimer: (any JobTimer)? = nil,
    timeLimitTimer: (any JobTimer)? = nil, droppedGroups: [TaskTypeEntry] = []
  ) {
    self.error = error
    self.stop = stop
    self.graceTimer = graceTimer
    self.timeLimitTimer = timeLimitTimer
    self.droppedGroups = droppedGroups
  }

  /// A cancel stopped the job (it finishes without an error and `isCancelled`).
  var cancelled: Bool {
    if case .cancelled? = stop { return true }
    return false
  }

  /// Groups given a limit (`setMaxConcurrentTasks`) that never tracked a task: reported as
  /// ``JobKitError/Code/limitNeverUsed`` before the job finishes, unless a cancel or a `fail`
  /// stopped it (it may have stopped before it tracked them). Read after the lock: the dropped
  /// groups are no longer reachable from the job's state, so nothing changes them.
  var unusedLimits: [Operation.Type] {
    guard stop == nil else { return [] }
    return droppedGroups.filter { $0.limit != nil && !$0.hasTracked }.map(\.type)
  }
}
