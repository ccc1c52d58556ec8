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
  /// tracked if its start was not observed) and its error, if it failed; for a
  /// ``ConcurrentOperation`` stopped with a reason (``ConcurrentOperation/cancel(reason:)``, its
  /// job's stop, a time limit) that did not fail otherwise, that reason
  /// (``ConcurrentOperation/cancellationReason``; a plain `cancel()`'s `CancellationError` is
  /// left out).
  ///
  /// Every task with a `taskTracked` event gets exactly one `taskFinished`, after it, whatever
  /// ends it (a finish, a failure, a cancel, a timeout, a stop). A retried task is one task here,
  /// as for routing and progress: one `taskTracked`, a `taskStarted` per attempt, and one
  /// `taskFinished` for the attempt that is routed (the last failed one if a stop ends its retry
  /// delay).
  case taskFinished(task: String, group: String, duration: Duration, error: (any Error)?, at: ContinuousClock.Instant)
  /// The last unfinished task of a group was routed (whether or not a callback ran for it).
  case groupFinished(group: String, at: ContinuousClock.Instant)
  /// `allTasksFinished()` is about to be called.
  case allTasksFinished(at: ContinuousClock.Instant)
  /// The job finished, with its error if any; for a job cancelled with a reason
  /// (``ConcurrentOperation/cancel(reason:)``, or a parent job's stop handed down: its
  /// `cancel(reason:)`, `fail(_:)`, time limit or `.failFast` failure), that reason (the job's
  /// own ``ConcurrentOperation/error`` stays `nil`; a plain `cancel()`'s `CancellationError` is
  /// left out). The stream ends after this event.
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

/// An event recorded under the job's lock, stamped with the time when it is delivered (no clock
/// is read under a lock). Durations come from instants the job read before taking its lock.
enum PendingJobEvent {
  case started
  case taskTracked(task: String, group: String)
  case taskStarted(task: String, group: String)
  case taskFinished(task: String, group: String, duration: Duration, error: (any Error)?)
  case groupFinished(group: String)
  case allTasksFinished
  case finished(error: (any Error)?)

  func stamped(_ at: ContinuousClock.Instant) -> JobEvent {
    switch self {
    case .started: return .started(at: at)
    case .taskTracked(let task, let group): return .taskTracked(task: task, group: group, at: at)
    case .taskStarted(let task, let group): return .taskStarted(task: task, group: group, at: at)
    case .taskFinished(let task, let group, let duration, let error):
      return .taskFinished(task: task, group: group, duration: duration, error: error, at: at)
    case .groupFinished(let group): return .groupFinished(group: group, at: at)
    case .allTasksFinished: return .allTasksFinished(at: at)
    case .finished(let error): return .finished(error: error, at: at)
    }
  }
}

/// The listeners of one job's events. Lives inside `JobState`, under the job's lock, which
/// records events (in the job's ``Outbox``) in the order of the state changes they describe;
/// the outbox's drainer delivers them after the lock is released, one thread at a time, so the
/// order is kept without resuming any consumer under a lock.
struct JobEventListeners {
  private var continuations: [UInt64: AsyncStream<JobEvent>.Continuation] = [:]
  /// The nested-job followers registered with some of the listeners, by listener.
  private var followers: [UInt64: any NestedJobFollower] = [:]
  private var nextID: UInt64 = 0
  /// The job finished: once the waiting events are delivered, the streams end.
  private var isClosing = false

  var isEmpty: Bool { continuations.isEmpty }

  /// Adds a listener, with the follower of the job's nested jobs that comes with it, if any.
  /// Returns `nil` once the job finished.
  mutating func add(_ continuation: AsyncStream<JobEvent>.Continuation, follower: (any NestedJobFollower)? = nil)
    -> UInt64?
  {
    guard !isClosing else { return nil }
    nextID += 1
    continuations[nextID] = continuation
    if let follower {
      followers[nextID] = follower
    }
    return nextID
  }

  /// Removes a listener. Returns its follower, for the caller to release after the lock.
  mutating func remove(_ id: UInt64) -> (any NestedJobFollower)? {
    continuations[id] = nil
    return followers.removeValue(forKey: id)
  }

  /// The followers of nested jobs, to tell of a tracked job after the lock (usually none).
  var nestedJobFollowers: [any NestedJobFollower] {
    followers.isEmpty ? [] : Array(followers.values)
  }

  /// The job finished: the streams end after the events recorded so far.
  mutating func close() {
    isClosing = true
  }

  /// One batch for the drainer: stamp and yield `events` to `listeners`, then finish them if
  /// `close`.
  struct Delivery {
    let listeners: [AsyncStream<JobEvent>.Continuation]
    let events: [PendingJobEvent]
    let close: Bool
    /// The followers dropped when the streams end, released with the batch after the lock.
    var droppedFollowers: [any NestedJobFollower] = []
  }

  /// The delivery of `events` taken from the outbox: `nil` if there is nothing to deliver.
  /// Once the job finished, it ends the streams and drops the listeners.
  mutating func delivery(of events: [PendingJobEvent]) -> Delivery? {
    guard !continuations.isEmpty, !events.isEmpty || isClosing else { return nil }
    if isClosing {
      defer {
        continuations = [:]
        followers = [:]
      }
      return Delivery(
        listeners: Array(continuations.values), events: events, close: true,
        droppedFollowers: Array(followers.values))
    }
    return Delivery(listeners: Array(continuations.values), events: events, close: false)
  }
}
