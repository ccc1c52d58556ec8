import JobKit

/// A bridge that consumes a job's events (and those of the jobs it nests): returned by
/// `JobController.logEvents(to:)`, `recordMetrics(prefix:factory:)` and
/// `traceEvents(with:context:)`. Await ``finished()`` to know that every event was handed on.
public struct JobObservation: Sendable {
  private let consumer: Task<Void, Never>

  /// Subscribes to `job`'s ``JobController/treeEvents`` now (so that subscribing before starting
  /// the job sees it whole), then gives each event to `handle`, in order, on one task at a time.
  /// `finish` runs once the job and every job it nests finished.
  init(
    _ job: JobController, handle: @escaping @Sendable (JobTreeEvent) -> Void,
    finish: @escaping @Sendable () -> Void = {}
  ) {
    let events = job.treeEvents
    consumer = Task {
      for await event in events {
        handle(event)
      }
      finish()
    }
  }

  /// Waits until the job and the jobs it nests finished and all their events were handed on.
  public func finished() async {
    await consumer.value
  }
}

extension JobTreeEvent.Job {
  /// The job as the bridges name it: its name, and its type if that differs.
  var label: String {
    name == type ? name : "\(name) (\(type))"
  }
}

extension Duration {
  /// The duration in nanoseconds (0 if negative, saturating).
  var nanoseconds: Int64 {
    let (seconds, attoseconds) = components
    guard seconds >= 0 else { return 0 }
    let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    return overflow ? .max : whole &+ attoseconds / 1_000_000_000
  }
}
