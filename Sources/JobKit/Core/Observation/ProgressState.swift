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
/// Publishing is serial without a lock: the first thread that changes the counts while nobody
/// publishes becomes the publisher and writes the latest counts until they stop changing; other
/// threads only mark the counts dirty. The job finishes only after its final counts (every unit
/// complete) were written, so whoever sees the job finished sees a complete `Progress`.
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

  private enum Publisher {
    case idle
    /// A thread publishes; `dirty` when the counts changed since it last read them.
    case busy(dirty: Bool)
  }
  private var publisher = Publisher.idle
  /// A job's finish that waits for the publishing thread to write the final counts.
  private(set) var pendingFinish: JobFinish?

  /// A task was tracked. Returns the progress the caller must publish to, if it must.
  mutating func tracked(_ task: Operation) -> Progress? {
    total += 1
    if progress != nil, task is any ProgressReporting {
      reporters[ObjectIdentifier(task)] = task
    }
    return changed()
  }

  /// A retried task's replaced attempt was forgotten.
  mutating func forgot(_ task: Operation) -> Progress? {
    total -= 1
    if progress != nil {
      reporters.removeValue(forKey: ObjectIdentifier(task))
    }
    return changed()
  }

  /// A task was routed.
  mutating func routed(_ task: Operation) -> Progress? {
    completed += 1
    if progress != nil, !reporters.isEmpty {
      reporters.removeValue(forKey: ObjectIdentifier(task))
    }
    return changed()
  }

  /// Installs `created` unless a progress exists, with the unrouted `tasks` that report their own
  /// progress. Returns the progress in use, and whether the caller must publish to it.
  mutating func install(_ created: Progress, unrouted tasks: some Sequence<Operation>) -> (Progress, publish: Bool) {
    if let progress { return (progress, false) }
    progress = created
    for task in tasks where task is any ProgressReporting {
      reporters[ObjectIdentifier(task)] = task
    }
    return (created, changed() != nil)
  }

  /// The job is about to finish (`finish`): every unit is complete (an empty job shows 1 of 1).
  /// Returns the finish to perform now, with the progress to publish the final counts to first
  /// (if any); or `nil` if another thread publishes: it performs `finish` once it wrote the
  /// final counts (see ``nextPublication()``).
  mutating func finish(_ finish: JobFinish) -> JobFinish? {
    isFinished = true
    total = max(1, total)
    completed = total
    reporters = [:]
    guard let progress else { return finish }
    switch publisher {
    case .idle:
      publisher = .busy(dirty: true)
      var now = finish
      now.publish = progress
      return now
    case .busy:
      publisher = .busy(dirty: true)
      pendingFinish = finish
      return nil
    }
  }

  enum Publication {
    /// Write these counts, then ask again.
    case write(total: Int64, completed: Int64)
    /// Nothing changed since the last write: publishing is over.
    case done
    /// Publishing is over, and the job's finish waited for it: perform it now.
    case finishJob(JobFinish)
  }

  /// For the publishing thread: what to do next.
  mutating func nextPublication() -> Publication {
    guard case .busy(let dirty) = publisher else { return .done }
    if dirty {
      publisher = .busy(dirty: false)
      return .write(total: total, completed: completed)
    }
    publisher = .idle
    if let finish = pendingFinish {
      pendingFinish = nil
      return .finishJob(finish)
    }
    return .done
  }

  /// The job's own counts and the tasks whose fraction adds to them, for `fractionCompleted`.
  func fractionInputs() -> (completed: Int64, total: Int64, finished: Bool, reporters: [Operation]) {
    (completed, total, isFinished, Array(reporters.values))
  }

  private mutating func changed() -> Progress? {
    guard let progress else { return nil }
    switch publisher {
    case .idle:
      publisher = .busy(dirty: true)
      return progress
    case .busy:
      publisher = .busy(dirty: true)
      return nil
    }
  }
}
