import Foundation

/// A job's progress, counted by JobKit and published to a `Progress` after the job's lock is
/// released.
///
/// One unit per tracked task (a retried task is one unit), completed when the task has been
/// routed. JobKit never builds a tree of `Progress` objects: swift-corelibs-foundation's
/// `Progress` is not thread-safe, and its fraction arithmetic traps (integer overflow) on trees
/// that grow while children complete. A nested job's own progress is still counted: the parent's
/// ``JobController/fractionCompleted`` adds the fraction of every unrouted task that reports
/// progress.
///
/// A change to the counts is published by the job's ``Outbox`` drainer, one thread at a time,
/// with the latest counts; the job finishes only after its final counts (every unit complete)
/// were written, so whoever sees the job finished sees a complete `Progress`.
struct ProgressState {
  /// How many tasks were tracked (minus replaced retry attempts) and routed.
  private(set) var total: Int64 = 0
  private(set) var completed: Int64 = 0
  /// The published object, created when the job's progress is first read; until then counting
  /// costs two additions per task and nothing is published.
  private(set) var progress: Progress?
  /// Unrouted tasks that report progress of their own, counted into the job's fraction. Only
  /// kept once `progress` exists.
  private(set) var reporters: [ObjectIdentifier: Operation] = [:]
  private var isFinished = false

  /// A task was tracked. Returns whether a published progress must show it.
  mutating func tracked(_ task: Operation) -> Bool {
    total += 1
    if progress != nil, task is any ProgressReporting {
      reporters[ObjectIdentifier(task)] = task
    }
    return progress != nil
  }

  /// A retried task's replaced attempt was forgotten.
  mutating func forgot(_ task: Operation) -> Bool {
    total -= 1
    if progress != nil {
      reporters.removeValue(forKey: ObjectIdentifier(task))
    }
    return progress != nil
  }

  /// A task was routed.
  mutating func routed(_ task: Operation) -> Bool {
    completed += 1
    if progress != nil, !reporters.isEmpty {
      reporters.removeValue(forKey: ObjectIdentifier(task))
    }
    return progress != nil
  }

  /// Installs `created` unless a progress exists, with the unrouted `tasks` that report their own
  /// progress. Returns the progress in use, and whether the caller must publish to it.
  mutating func install(_ created: Progress, unrouted tasks: some Sequence<Operation>) -> (Progress, publish: Bool) {
    if let progress { return (progress, false) }
    progress = created
    for task in tasks where task is any ProgressReporting {
      reporters[ObjectIdentifier(task)] = task
    }
    return (created, true)
  }

  /// The job is about to finish: every unit is complete (an empty job shows 1 of 1). Returns
  /// whether a published progress must show it.
  mutating func finish() -> Bool {
    isFinished = true
    total = max(1, total)
    completed = total
    reporters = [:]
    return progress != nil
  }

  /// The counts to write to the published progress, if there is one.
  func publication() -> (progress: Progress, total: Int64, completed: Int64)? {
    progress.map { ($0, total, completed) }
  }

  /// The job's own counts and the tasks whose fraction adds to them, for `fractionCompleted`.
  var fractionInputs: (completed: Int64, total: Int64, finished: Bool, reporters: [Operation]) {
    (completed, total, isFinished, Array(reporters.values))
  }
}
