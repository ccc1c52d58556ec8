import Foundation

extension JobController: ProgressReporting {
  /// The job's lifecycle as an asynchronous sequence: `started`, `taskTracked`, `taskStarted`,
  /// `taskFinished` (with duration and error), `groupFinished`, `allTasksFinished`, `finished`,
  /// in the order they happen, each with a monotonic timestamp. The sequence ends right after
  /// `finished`.
  ///
  /// Each access returns a new sequence that receives every event from that moment on, so
  /// several consumers each get every event if each accesses `events` once for itself; one
  /// sequence iterated by several tasks splits the events between them (an `AsyncStream` is not
  /// a broadcast). Subscribe before starting the job to see all of them. A job that
  /// nobody listens to records nothing (no timestamps, no buffer). Events wait in an unbounded
  /// buffer until the consumer takes them; a consumer that stops iterating is removed.
  ///
  /// Feeding a logger (for example swift-log's `Logger`, without JobKit depending on it):
  ///
  /// ```swift
  /// let events = job.events
  /// job.startJob()
  /// for await event in events {
  ///     switch event {
  ///     case .taskFinished(let task, _, let duration, let error?, _):
  ///         logger.warning("\(task) failed after \(duration): \(error)")
  ///     case .taskFinished(let task, _, let duration, nil, _):
  ///         logger.debug("\(task) finished in \(duration)")
  ///     default:
  ///         logger.trace("\(event)")
  ///     }
  /// }
  /// ```
  public var events: AsyncStream<JobEvent> {
    events(following: nil)
  }

  /// ``events``, with `follower` told of each job this job tracks while the stream is listened
  /// to (see `NestedJobFollower`).
  func events(following follower: (any NestedJobFollower)?) -> AsyncStream<JobEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    if let id = withJobState({ $0.addListener(continuation, follower: follower) }) {
      continuation.onTermination = { [weak self] _ in
        // The follower is released here, after the lock.
        _ = self?.withJobState { $0.removeListener(id) }
      }
    } else {
      continuation.finish()
    }
    return stream
  }

  /// The job's progress.
  ///
  /// `totalUnitCount` grows by one as each task is tracked (a retried task counts once) and
  /// `completedUnitCount` counts the routed ones, so `fractionCompleted` is honest for a job that
  /// decides its next steps as it goes. A finished job shows every unit completed (an empty one,
  /// 1 of 1), and it is complete before the job's `isFinished` becomes `true`.
  ///
  /// JobKit counts on its own and writes the counts to this object after releasing its lock, one
  /// thread at a time; it never adds child `Progress` objects (swift-corelibs-foundation's
  /// fraction arithmetic traps on trees that grow while children complete). A nested job's unit
  /// here completes when the nested job has been routed; ``fractionCompleted`` also counts the
  /// part of a nested job that is already done.
  ///
  /// Created the first time it is read (or ``fractionCompleted`` is); a job whose progress is
  /// never read pays nothing for it. swift-corelibs-foundation's `Progress` is not thread-safe:
  /// to poll from another thread, read ``fractionCompleted``, which never touches this object.
  /// On Apple platforms, KVO observers of this object run on the thread that publishes, with no
  /// JobKit lock held.
  public var progress: Progress {
    if let existing = readJobState({ $0.progress.progress }) { return existing }
    let created = Progress(parent: nil, userInfo: nil)
    return withJobState { $0.installProgress(created) }
  }

  /// How much of the job is done, from 0 to 1: routed tasks, plus the fraction done of each
  /// unrouted task that reports progress of its own (a nested job, or any `ProgressReporting`
  /// operation). 1 once the job finished. Safe to poll from any thread (for example a progress
  /// line on a timer): it reads JobKit's own counts, never a `Progress` JobKit writes.
  ///
  /// It can go down when the job tracks new tasks, as the job discovers more work.
  public var fractionCompleted: Double {
    let (done, total, nested) = fractionParts()
    guard let total else { return done }
    guard !nested.isEmpty else { return min(1, done / total) }
    // A nested job's fraction is the sum of its own parts: walk the tree with a list of
    // (job, weight) instead of recursing, so a chain of any depth costs no stack.
    var sum = done / total
    var pending = nested.map { (job: $0, weight: 1 / total) }
    while let next = pending.popLast() {
      let (done, total, nested) = next.job.fractionParts()
      guard let total else {
        sum += next.weight * done
        continue
      }
      sum += next.weight * done / total
      for child in nested {
        pending.append((child, next.weight / total))
      }
    }
    return min(1, sum)
  }

  /// This job's part of ``fractionCompleted``: routed tasks plus the fraction of unrouted
  /// non-job tasks that report progress, over `total` (`nil` when the sum is the fraction
  /// already: the job finished, or tracked nothing yet), and the unrouted nested jobs, whose
  /// fraction the caller adds (each counts up to one task of `total`).
  private func fractionParts() -> (done: Double, total: Double?, nested: [JobController]) {
    _ = progress
    let (completed, total, finished, reporters) = readJobState { $0.progress.fractionInputs }
    if finished { return (1, nil, []) }
    guard total > 0 else { return (0, nil, []) }
    var done = Double(completed)
    var nested: [JobController] = []
    for task in reporters {
      // With no lock held: a task's `progress` is its own code.
      if let job = task as? JobController {
        nested.append(job)
      } else if let reporting = task as? any ProgressReporting {
        done += min(1, max(0, reporting.progress.fractionCompleted))
      }
    }
    return (done, Double(total), nested)
  }

  /// The text of ``JobController/debugDescription``.
  func debugText() -> String {
    let queued = state.withLock { $0.queueClaimed }
    let summary = readJobState { $0.debugSummary(queued: queued) }
    var lines = ["<\(type(of: self)) \(summary.phase), \(summary.unfinished) unfinished task(s)"]
    for group in summary.groups {
      var line = "  \(group.name): \(group.unfinished) unfinished"
      if let limit = group.limit {
        line += ", limit \(limit) (\(group.running) running, \(group.waiting) waiting)"
      }
      lines.append(line)
    }
    if !summary.failures.isEmpty {
      lines.append("  failures (\(summary.failures.count)):")
      lines += summary.failures.prefix(10).map { "    \($0)" }
    }
    let percent = summary.tracked > 0 ? Double(summary.routed) / Double(summary.tracked) * 100 : 0
    let progressLine =
      "  progress: \(summary.routed) of \(summary.tracked) tracked task(s) routed"
      + String(format: ", %.0f%% complete", percent)
    lines.append(progressLine + ">")
    return lines.joined(separator: "\n")
  }
}
