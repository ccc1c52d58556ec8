import Foundation

/// Tracking a task that waits for its job's admission (`JobAdmission`): the job's side.
extension JobController {
  enum AdmissionTracking {
    /// Tracked: it waits in the admission line, or went on (queued, or held by a limit or a
    /// suspension).
    case tracked
    /// The job tracks it already (reported).
    case duplicate
    /// The job finished: not tracked (reported only if asked to).
    case jobFinished
  }

  /// Tracks `task` with `node` (made by the caller, with no lock held) to wait in the job's
  /// admission line for ``taskQueue``: it is observed first, then enters the line, so no
  /// admission can queue it before its finish is heard. While the job stops, it is tracked,
  /// cancelled and queued at once, and the job waits for it.
  func trackForAdmission(_ task: Operation, node: TrackedTask, reportsJobFinished: Bool) -> AdmissionTracking {
    var notes = TrackingNotes(reportsJobFinished: reportsJobFinished)
    let tracked = track(
      task, node: node, queue: taskQueue, replacing: nil, waitsForDependencies: false, waitsForAdmission: true,
      notes: &notes)
    if tracked != nil { return .tracked }
    return notes.jobFinished ? .jobFinished : .duplicate
  }

  /// `node`, tracked for admission, is observed now: it enters the line, or goes on at once.
  func enterAdmission(_ node: TrackedTask, queue: OperationQueue) {
    let exits = jobState.withLock { $0.enterAdmission(node, queue: queue) }
    if !exits.isEmpty {
      performAdmissionExits(exits)
    }
  }

  /// Carries out what an admission transition let go, with no lock held: each task is
  /// prepared (``prepareForAdmission(_:shared:)``), then queued if `ready`; the others ask their
  /// group for a slot (limits, a suspension) in one more lock.
  func performAdmissionExits(_ exits: [AdmissionExit]) {
    var asksForSlots = false
    for exit in exits {
      if exit.observesEvents {
        confirmTracked(exit.task, node: exit.node)
      }
      prepareForAdmission(exit.task, shared: exit.shared)
      if exit.ready {
        enqueue(exit.task, on: exit.queue)
      } else {
        asksForSlots = true
      }
    }
    guard asksForSlots else { return }
    let (admitted, effects) = jobState.withLock { state in
      (state.admitAfterAdmission(exits), state.takeAdmissionEffects())
    }
    performAdmissionEffects(effects)
    queueAdmitted(admitted)
  }
}
