import Foundation

/// Tracking a task that waits for its job's admission (`JobAdmission`): the job's side.
extension JobController {
  enum AdmissionTracking {
    /// Tracked: it waits in the admission line, or went on (queued, or held by a limit or a
    /// suspension). `jobSuspended`: the job's suspension concerned its new children then, so the
    /// caller suspends the task if the job still is (a suspension that comes later tells it).
    case tracked(jobSuspended: Bool)
    /// The job tracks it already (reported).
    case duplicate
    /// The job finished: not tracked (reported only if asked to).
    case jobFinished
  }

  /// Tracks `task` with `node` (made by the caller, with no lock held) to wait in the job's
  /// admission line for ``taskQueue``: it is observed first, then enters the line, so no
  /// admission can queue it before its finish is heard. While the job stops, it is tracked,
  /// cancelled and queued at once, and the job waits for it.
  func trackForAdmission(_ task: Operation, node: TaskNode, reportsJobFinished: Bool) -> AdmissionTracking {
    var notes = TrackingNotes(reportsJobFinished: reportsJobFinished)
    let tracked = track(
      task, node: node, queue: queueOfTasks, replacing: nil, waitsForDependencies: false, waitsForAdmission: true,
      notes: &notes)
    if tracked != nil { return .tracked(jobSuspended: notes.jobSuspended) }
    return notes.jobFinished ? .jobFinished : .duplicate
  }

  /// `node`, tracked for admission, is observed now: it enters the line, or goes on at once.
  func enterAdmission(_ node: TaskNode, queue: OperationQueue) {
    if let exit = withJobState({ $0.enterAdmission(node, queue: queue) }) {
      performExit(exit)
    }
  }
}
