import Foundation

/// A suspended job (``ConcurrentOperation/suspend()`` on a ``JobController``): the tasks it would
/// queue wait for the resume in its admission (`JobAdmission`); its children are told to suspend
/// and resume.
///
/// The job's own ``OperationState`` holds the flag users see; the job follows it (a
/// ``StampedFlag``: each change reaches the job with its generation, `setSuspended(_:generation:)`,
/// so a stale change arriving late is dropped). The
/// children are told by one thread at a time (`isTellingChildren`), which loops until they were told
/// the latest state, so racing suspends and resumes leave them as the job is.
struct JobSuspension {
  /// Follows the job's operation's own flag.
  fileprivate(set) var flag = StampedFlag()
  var isSuspended: Bool { flag.isSet }
  /// What the children were last told (`true`: suspend).
  fileprivate(set) var childrenSuspended = false
  /// A thread is telling the children (see `nextNoticeToChildren()`).
  fileprivate(set) var isTellingChildren = false

  /// Whether a child tracked now may have to be suspended by its tracker: the job is
  /// suspended, or its children are or are being told. Otherwise a suspension that comes later
  /// tells it with the others (it is tracked by then).
  var concernsNewChildren: Bool { isSuspended || childrenSuspended || isTellingChildren }
}

/// Suspension: the job-queued tasks tracked while suspended wait like tasks waiting for a group
/// slot (`JobState+Limits.swift`): a `track` hands them to `admitOrWait` once observed, which
/// holds them back in the admission's resume line (their state's slot is
/// `.waitingForResume(queue)`); no slot is given while suspended. A plain job pays one Bool check
/// per `track` for it. A resume admits them in order (limits first: tasks that waited for a slot
/// before the suspension keep their place); a stop ends the suspension the same way, after
/// cancelling them, so they finish without running.
extension JobState {
  struct SuspensionActions {
    /// Tasks admitted by a resume: the caller queues them.
    var exits: [TaskExit] = []
    /// The caller tells the children: it calls `nextNoticeToChildren()` until it returns `nil`.
    var tellsChildren = false
    /// Held tasks that finished meanwhile, dropped from the list: released with the actions,
    /// after the lock (a node may hold a user's completion closure).
    var released: [TaskNode] = []
  }

  /// The job's operation was suspended or resumed (change number `generation`). A change older
  /// than one applied, or a suspend of a stopping or finished job, changes nothing.
  mutating func setSuspended(_ isSuspended: Bool, generation: UInt64) -> SuspensionActions {
    let wasSuspended = suspension.isSuspended
    // A suspend of a stopping or finished job changes nothing, yet counts as the latest change.
    let value = isSuspended && (phase.isStopping || phase.isFinished) ? wasSuspended : isSuspended
    guard suspension.flag.follow(value, generation: generation), value != wasSuspended else {
      return SuspensionActions()
    }
    var actions = SuspensionActions()
    if !isSuspended {
      (actions.exits, actions.released) = admitSuspended()
    }
    if !suspension.isTellingChildren, suspension.childrenSuspended != isSuspended {
      suspension.isTellingChildren = true
      actions.tellsChildren = true
    }
    return actions
  }

  /// For the thread telling the children: what to tell them now (`suspend`, and the unfinished
  /// tracked `ConcurrentOperation`s, oldest first), or `nil` once they were told the latest state
  /// (the thread then no longer tells them).
  mutating func nextNoticeToChildren() -> (suspend: Bool, children: [ConcurrentOperation])? {
    guard suspension.childrenSuspended != suspension.isSuspended else {
      suspension.isTellingChildren = false
      return nil
    }
    suspension.childrenSuspended = suspension.isSuspended
    var children: [ConcurrentOperation] = []
    for node in registry.nodes where node.state.isUnfinished {
      if let child = node.task as? ConcurrentOperation {
        children.append(child)
      }
    }
    children.reverse()
    return (suspension.isSuspended, children)
  }

  /// The job stops: the suspension ends (a stopped job is not suspended). Returns the waiting
  /// tasks admitted, which the caller queues after cancelling them.
  mutating func endSuspensionForStop() -> (admitted: [TaskExit], released: [TaskNode]) {
    guard suspension.isSuspended else { return ([], []) }
    suspension.flag.clearQuietly()
    return admitSuspended()
  }

  /// Admits what the suspension held back: first the tasks waiting in a limited group's line
  /// (they were there first), then the tasks that waited for the resume, each taking a slot of
  /// its group's limit or its line's end. Also returns the held tasks that finished meanwhile,
  /// for the caller to release after the lock.
  private mutating func admitSuspended() -> (admitted: [TaskExit], released: [TaskNode]) {
    var admitted: [TaskExit] = []
    var released: [TaskNode] = []
    for group in registry.groups.values where admission.waitingForSlot(of: group) > 0 {
      admitted += admitWaiting(of: group)
    }
    admitted = inTrackingOrder(admitted)
    for node in admission.takeResumeLine() {
      // A task no longer held back (it finished meanwhile) is not queued.
      guard let queue = node.stopWaiting(for: .resume) else {
        released.append(node)
        continue
      }
      if admitOrWait(node, queue: queue), let task = node.task {
        admitted.append(TaskExit(node, task, to: .queue, queue: queue))
      }
    }
    return (admitted, released)
  }
}
