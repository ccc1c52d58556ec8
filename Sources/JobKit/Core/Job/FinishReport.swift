import Foundation

/// What routing a finished task needs to know of it, read by the thread that saw it finish with
/// no lock held (its `error`, `isCancelled` and `name` may be the user's code), so that the
/// routing decision can be taken under the lock in the same step that takes the task. A class,
/// so that a task's state stays small: a plain task shares ``nothing``.
final class FinishReport: Sendable {
  /// A ``ConcurrentOperation``'s error.
  let error: (any Error)?
  /// Foundation's `isCancelled`, read only for a failed task (`nil` when not read).
  let isCancelled: Bool?
  /// The task's `name`, read only while events are listened to.
  let name: String?
  /// Why the task was stopped (its `cancellationReason`, unless a plain `cancel()`'s), read
  /// only while events are listened to: its `taskFinished` event carries it.
  let reason: (any Error)?

  /// The report of a task that did not fail and whose events nobody listens to.
  static let nothing = FinishReport()

  init(error: (any Error)? = nil, isCancelled: Bool? = nil, name: String? = nil, reason: (any Error)? = nil) {
    self.error = error
    self.isCancelled = isCancelled
    self.name = name
    self.reason = reason
  }
}

/// A scheduled timer, boxed so that a task's state stays small (most tasks have none).
final class TimerBox: Sendable {
  let timer: any JobTimer

  init(_ timer: any JobTimer) {
    self.timer = timer
  }
}
