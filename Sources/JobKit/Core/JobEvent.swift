import Foundation

/// One step in a job's life, as delivered by ``JobController/events``.
///
/// Each event carries a monotonic `at` timestamp (`ContinuousClock`). Tasks are named by their
/// `name`, or their type name when they have none; `group` is the task's dynamic type name.
public enum JobEvent: Sendable {
  /// The job started (before `main()`).
  case started(at: ContinuousClock.Instant)
  /// A task was tracked.
  case taskTracked(task: String, group: String, at: ContinuousClock.Instant)
  /// A ``ConcurrentOperation`` task started. (Plain `Operation`s cannot be observed starting on
  /// Linux; their durations count from when they were tracked.)
  case taskStarted(task: String, group: String, at: ContinuousClock.Instant)
  /// A task finished and is being routed: how long it ran (from its start, or from when it was
  /// tracked if its start was not observed) and its error, if it failed.
  case taskFinished(task: String, group: String, duration: Duration, error: (any Error)?, at: ContinuousClock.Instant)
  /// The last unfinished task of a group was routed (whether or not a callback ran for it).
  case groupFinished(group: String, at: ContinuousClock.Instant)
  /// `allTasksFinished()` is about to be called.
  case allTasksFinished(at: ContinuousClock.Instant)
  /// The job finished, with its error if any. The stream ends after this event.
  case finished(error: (any Error)?, at: ContinuousClock.Instant)

  /// When the event happened.
  public var timestamp: ContinuousClock.Instant {
    switch self {
    case .started(let at), .taskTracked(_, _, let at), .taskStarted(_, _, let at),
      .taskFinished(_, _, _, _, let at), .groupFinished(_, let at), .allTasksFinished(let at),
      .finished(_, let at):
      return at
    }
  }
}

/// The listeners of one job's events and the per-task timing they need. Lives inside `JobState`.
struct JobEventListeners {
  private var continuations: [UInt64: AsyncStream<JobEvent>.Continuation] = [:]
  private var nextID: UInt64 = 0

  var isEmpty: Bool { continuations.isEmpty }

  mutating func add(_ continuation: AsyncStream<JobEvent>.Continuation) -> UInt64 {
    nextID += 1
    continuations[nextID] = continuation
    return nextID
  }

  mutating func remove(_ id: UInt64) {
    continuations[id] = nil
  }

  /// Delivers `event` to every listener. Called under the job's lock so that events keep the
  /// order of the state changes they describe; `yield` only buffers the event and resumes a
  /// waiting consumer, it never runs the consumer's code on this thread.
  func yield(_ event: @autoclosure () -> JobEvent) {
    guard !continuations.isEmpty else { return }
    let event = event()
    for continuation in continuations.values {
      continuation.yield(event)
    }
  }

  /// Removes and returns every listener, to be finished after the lock is released.
  mutating func removeAll() -> [AsyncStream<JobEvent>.Continuation] {
    defer { continuations = [:] }
    return Array(continuations.values)
  }
}
