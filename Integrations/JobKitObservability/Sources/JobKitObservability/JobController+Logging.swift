import JobKit
import Logging

extension JobController {
  /// Logs this job's events, and those of the jobs it tracks, through `logger`, until the job
  /// finishes. Call it before starting the job to see the job whole.
  ///
  /// Levels: the job's start and finish at `info` (a failed job at `error`), a failed task at
  /// `warning`, a finished task, a finished group and `allTasksFinished` at `debug`, a task's
  /// tracking and start at `trace`. Each message carries the metadata `jobkit.job` (the job's
  /// name), `jobkit.job_id` and, for a nested job, `jobkit.parent_job_id` (ids as in
  /// ``JobTreeEvent/Job``), and for a task `jobkit.task`, `jobkit.group`, `jobkit.duration_ms`
  /// and `jobkit.error`.
  ///
  /// ```swift
  /// let logging = job.logEvents(to: Logger(label: "import"))
  /// try await job.run()
  /// await logging.finished()
  /// ```
  @discardableResult
  public func logEvents(to logger: Logger) -> JobObservation {
    JobObservation(self) { event in
      JobEventLog.log(event, to: logger)
    }
  }
}

/// How a ``JobTreeEvent`` reads in a log.
enum JobEventLog {
  static func log(_ tree: JobTreeEvent, to logger: Logger) {
    var metadata: Logger.Metadata = [
      "jobkit.job": "\(tree.job.label)",
      "jobkit.job_id": "\(tree.job.id)",
    ]
    if let parent = tree.job.parent {
      metadata["jobkit.parent_job_id"] = "\(parent)"
    }
    func task(_ name: String, _ group: String) {
      metadata["jobkit.task"] = "\(name)"
      metadata["jobkit.group"] = "\(group)"
    }
    switch tree.event {
    case .started:
      logger.info("job started", metadata: metadata)
    case .taskTracked(let name, let group, _):
      task(name, group)
      logger.trace("task tracked", metadata: metadata)
    case .taskStarted(let name, let group, _):
      task(name, group)
      logger.trace("task started", metadata: metadata)
    case .taskFinished(let name, let group, let duration, let error, _):
      task(name, group)
      metadata["jobkit.duration_ms"] = "\(Double(duration.nanoseconds) / 1e6)"
      if let error {
        metadata["jobkit.error"] = "\(String(describing: error))"
        logger.warning("task failed", metadata: metadata)
      } else {
        logger.debug("task finished", metadata: metadata)
      }
    case .groupFinished(let group, _):
      metadata["jobkit.group"] = "\(group)"
      logger.debug("group finished", metadata: metadata)
    case .allTasksFinished:
      logger.debug("all tasks finished", metadata: metadata)
    case .finished(let error?, _):
      metadata["jobkit.error"] = "\(String(describing: error))"
      logger.error("job failed", metadata: metadata)
    case .finished(nil, _):
      logger.info("job finished", metadata: metadata)
    }
  }
}
