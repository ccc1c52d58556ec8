import CoreMetrics
import JobKit
import Metrics

extension JobController {
  /// Counts and times this job's tasks per group, and the job and the jobs it tracks, with
  /// swift-metrics, until the job finishes. Call it before starting the job.
  ///
  /// - `<prefix>_tasks_total` (counter; dimensions `group`, `outcome`: `succeeded` or `failed`)
  /// - `<prefix>_task_duration` (timer, nanoseconds; dimension `group`)
  /// - `<prefix>_jobs_total` (counter; dimensions `job`: the job's type, `outcome`)
  /// - `<prefix>_job_duration` (timer, nanoseconds; dimension `job`)
  ///
  /// A task's duration runs from its observed start (or its tracking, for a plain `Operation`)
  /// to its finish; a job's from its `started` to its `finished` event.
  ///
  /// - Parameters:
  ///   - prefix: the start of every label.
  ///   - factory: where the metrics go; the bootstrapped `MetricsSystem.factory` by default.
  @discardableResult
  public func recordMetrics(prefix: String = "jobkit", factory: any MetricsFactory = MetricsSystem.factory)
    -> JobObservation
  {
    let metrics = JobMetrics(prefix: prefix, factory: factory)
    return JobObservation(self) { event in
      metrics.record(event)
    }
  }
}

/// The metrics of one `recordMetrics` call. Only its observation's task touches it, one event
/// at a time.
final class JobMetrics: @unchecked Sendable {
  // @unchecked Sendable: only used by one JobObservation's consumer task, sequentially.
  let prefix: String
  let factory: any MetricsFactory
  private var starts: [Int: ContinuousClock.Instant] = [:]

  init(prefix: String, factory: any MetricsFactory) {
    self.prefix = prefix
    self.factory = factory
  }

  func record(_ tree: JobTreeEvent) {
    switch tree.event {
    case .started(let at):
      starts[tree.job.id] = at
    case .taskFinished(_, let group, let duration, let error, _):
      Counter(
        label: "\(prefix)_tasks_total", dimensions: [("group", group), ("outcome", Self.outcome(error))],
        factory: factory
      ).increment()
      Timer(label: "\(prefix)_task_duration", dimensions: [("group", group)], factory: factory)
        .recordNanoseconds(duration.nanoseconds)
    case .finished(let error, let at):
      Counter(
        label: "\(prefix)_jobs_total", dimensions: [("job", tree.job.type), ("outcome", Self.outcome(error))],
        factory: factory
      ).increment()
      if let start = starts.removeValue(forKey: tree.job.id) {
        Timer(label: "\(prefix)_job_duration", dimensions: [("job", tree.job.type)], factory: factory)
          .recordNanoseconds((at - start).nanoseconds)
      }
    case .taskTracked, .taskStarted, .groupFinished, .allTasksFinished:
      break
    }
  }

  static func outcome(_ error: (any Error)?) -> String {
    error == nil ? "succeeded" : "failed"
  }
}
