import Foundation

/// How a job finishes: its error, whether a cancel stopped it, and the stop's grace-period timer
/// to cancel. It also carries the job's dropped groups out of the lock: their handlers may hold
/// the last reference to a user's object, whose `deinit` must not run under the lock, and its
/// retired completion-block hooks, to remove from the hook table before the job finishes. A class,
/// made once per job, so that the drainer's batches stay small.
final class JobFinish {
  let error: (any Error)?
  /// A cancel stopped the job (it finishes without an error and `isCancelled`).
  let cancelled: Bool
  let graceTimer: (any JobTimer)?
  let droppedGroups: [TaskGroupEntry]
  let retiredHooks: [CompletionBlockHook.Hook]

  init(
    error: (any Error)?, cancelled: Bool = false, graceTimer: (any JobTimer)? = nil,
    droppedGroups: [TaskGroupEntry] = [], retiredHooks: [CompletionBlockHook.Hook] = []
  ) {
    self.error = error
    self.cancelled = cancelled
    self.graceTimer = graceTimer
    self.droppedGroups = droppedGroups
    self.retiredHooks = retiredHooks
  }
}
