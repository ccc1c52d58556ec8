import Foundation

extension JobController: ProgressReporting {
  /// The job's lifecycle as an asynchronous sequence: `started`, `taskTracked`, `taskStarted`,
  /// `taskFinished` (with duration and error), `groupFinished`, `allTasksFinished`, `finished`,
  /// in the order they happen, each with a monotonic timestamp. The sequence ends right after
  /// `finished`.
  ///
  /// Each access returns a new sequence that receives the events from that moment on, so several
  /// consumers may listen; subscribe before starting the job to see all of them. A job that
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
    let (stream, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    if let id = jobState.withLock({ $0.addListener(continuation) }) {
      continuation.onTermination = { [weak self] _ in
        self?.jobState.withLock { $0.listeners.remove(id) }
      }
    } else {
      continuation.finish()
    }
    return stream
  }

  /// The job's progress.
  ///
  /// `totalUnitCount` grows by one as each task is tracked and `completedUnitCount` counts the
  /// routed ones, so `fractionCompleted` is honest for a job that decides its next steps as it
  /// goes. A task that reports a `Progress` of its own (a nested job, or any
  /// `ProgressReporting` operation) is added as a child with one pending unit, so its own
  /// fraction counts: a nested job's progress is a child of its parent's. A finished job shows
  /// every unit completed (an empty one, 1 of 1).
  ///
  /// Created the first time it is read; a job whose progress is never read pays nothing for it.
  /// swift-corelibs-foundation's `Progress` is not thread-safe: JobKit serializes its own
  /// updates, so read ``fractionCompleted`` (which takes the same lock) to poll it from another
  /// thread on Linux; reading the object itself is safe from the job's callbacks once the tasks
  /// you look at have finished. On Apple platforms its KVO notifications are posted on the thread
  /// that updated it, while JobKit holds the job's lock: observers must not call back into the
  /// job.
  public var progress: Progress {
    if let existing = jobState.withLock({ $0.progress }) { return existing }
    return jobState.withLock { $0.installProgress(Progress(parent: nil, userInfo: nil)) }
  }

  /// `progress.fractionCompleted`, read under the lock JobKit updates every `Progress` with, so
  /// it is safe to poll from any thread (for example a progress line on a timer).
  public var fractionCompleted: Double {
    let progress = progress
    return ProgressLock.withLock { progress.fractionCompleted }
  }

  /// The text of ``JobController/debugDescription``.
  func debugText() -> String {
    let summary = jobState.withLock { $0.debugSummary() }
    var lines = ["<\(type(of: self)) \(summary.lifecycle), \(summary.unfinished) unfinished task(s)"]
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
    var progressLine = "  progress: \(summary.routed) of \(summary.tracked) tracked task(s) routed"
    if let fraction = summary.fraction {
      progressLine += String(format: ", %.0f%% complete", fraction * 100)
    }
    lines.append(progressLine + ">")
    return lines.joined(separator: "\n")
  }
}
