import Foundation
import JobKit

/// Captures a job's callbacks and lifecycle in order, from its ``JobController/events``.
///
/// Create it before starting the job, then await ``finished()`` for the whole record:
///
/// ```swift
/// let recorder = JobRecorder(job)
/// job.startJob()
/// let order = await recorder.finished()
/// #expect(order == ["started", "taskFinished A", "groupFinished A", "allTasksFinished", "finished"])
/// ```
public final class JobRecorder: Sendable {
  private let record: Task<[JobEvent], Never>

  /// Starts recording `job`'s events. Events before this call are not seen.
  public init(_ job: JobController) {
    let events = job.events
    record = Task {
      var received: [JobEvent] = []
      for await event in events { received.append(event) }
      return received
    }
  }

  /// Waits until the job finished and returns its callback order as readable lines:
  /// `started`, `taskFinished <task>` (or `taskFailed <task>`), `groupFinished <group>`,
  /// `allTasksFinished`, `finished` (or `failed`). Tracking and start events are left out; use
  /// ``events()`` for everything.
  public func finished() async -> [String] {
    await events().compactMap(Self.line)
  }

  /// Waits until the job finished and returns every event it emitted while recorded.
  public func events() async -> [JobEvent] {
    await record.value
  }

  private static func line(_ event: JobEvent) -> String? {
    switch event {
    case .started: return "started"
    case .taskTracked, .taskStarted: return nil
    case .taskFinished(let task, _, _, let error, _):
      return error == nil ? "taskFinished \(task)" : "taskFailed \(task)"
    case .groupFinished(let group, _): return "groupFinished \(group)"
    case .allTasksFinished: return "allTasksFinished"
    case .finished(let error, _): return error == nil ? "finished" : "failed"
    }
  }
}
