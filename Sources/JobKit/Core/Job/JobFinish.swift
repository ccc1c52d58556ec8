import Foundation

/// How a job finishes: its error, whether a cancel stopped it, and the stop's grace-period timer
/// to cancel. It also carries the job's dropped groups out of the lock: their handlers may hold
/// the last reference to a user's object, whose `deinit` must not run under the lock. A class,
/// made once per job, so that the drainer's batches stay small.
final class JobFinish {
  let error: (any Error)?
  /// A cancel stopped the job (it finishes without an error and `isCancelled`).
  let cancelled: Bool
  let graceTimer: (any JobTimer)?
  /// The armed timer of the job's time limit, to cancel.
  let timeLimitTimer: (any JobTimer)?
  let droppedGroups: [TaskGroupEntry]
  /// Producers waiting for room, told that the job finished.
  let effects: AdmissionEffects?

  init(
    error: (any Error)?, cancelled: Bool = false, graceTimer: (any JobTimer)? = nil,
    timeLimitTimer: (any JobTimer)? = nil,
    droppedGroups: [TaskGroupEntry] = [], effects: AdmissionEffects? = nil
  ) {
    self.effects = effects
    self.error = error
    self.cancelled = cancelled
    self.graceTimer = graceTimer
    self.timeLimitTimer = timeLimitTimer
    self.droppedGroups = droppedGroups
  }
}
