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
      performAdmissionExit(exit)
    }
  }

  /// Carries out what an admission transition let go, with no lock held: each task is
  /// prepared (``prepareForAdmission(_:shared:)``), then queued if `ready`; the others ask their
  /// group for a slot (limits, a suspension) in one more lock. A full batch
  /// (`JobAdmission.exitBatch`) is followed by the next one, until the line lets none go.
  func performAdmissionExits(_ exits: [AdmissionExit]) {
    var batch = exits
    while !batch.isEmpty {
      var asksForSlots = false
      for exit in batch where !prepareAndQueue(exit) {
        asksForSlots = true
      }
      if asksForSlots {
        admitAfterAdmission(batch)
      }
      guard batch.count >= JobAdmission.exitBatch else { return }
      batch = withJobState { $0.admissionExitsFromLine() }
    }
  }

  /// `performAdmissionExits` for one exit (a step of a sequential group): no array.
  func performAdmissionExit(_ exit: AdmissionExit) {
    if !prepareAndQueue(exit) {
      admitAfterAdmission([exit])
    }
  }

  /// Prepares `exit`'s task and queues it if it is `ready`. Returns whether it was ready.
  private func prepareAndQueue(_ exit: AdmissionExit) -> Bool {
    if exit.observesEvents {
      confirmTracked(exit.task, node: exit.node)
    }
    prepareForAdmission(exit.task, shared: exit.shared)
    if exit.cancelsFirst {
      exit.task.cancel(handingDown: stopReason())
    }
    guard exit.ready else { return false }
    enqueue(exit.task, on: exit.queue)
    return true
  }

  /// The exits that were not ready ask their group for a slot; those admitted are queued.
  private func admitAfterAdmission(_ exits: [AdmissionExit]) {
    queueAdmitted(withJobState { $0.admitAfterAdmission(exits) })
  }
}
