import Foundation

/// When a task whose events are observed was tracked, started and finished, and whether its
/// `taskFinished` event went out (exactly one per task; see `JobState.reportFinish`). Guarded by
/// the job's lock.
final class TaskTiming: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is guarded by the owning job's lock.
  var trackedAt: ContinuousClock.Instant?
  var startedAt: ContinuousClock.Instant?
  var finishedAt: ContinuousClock.Instant?
  var finishReported = false
}
