/// Why a job stops before its work is done.
enum JobStop {
  /// A cancel, with the reason given to `cancel(reason:)` (or handed down by a parent job);
  /// `nil` for a plain `cancel()`, whose `CancellationError` no event carries.
  case cancelled(reason: (any Error)?)
  case failed(any Error)

  /// The error the job's `finished` event carries for this stop (its own `error` stays `nil`
  /// after a cancel).
  var eventError: (any Error)? {
    switch self {
    case .cancelled(let reason): return reason
    case .failed(let error): return error
    }
  }
}

/// Where a job is in its life and why it stops early (if it does), as one value: each case
/// carries only what is valid in it.
///
/// Who runs the job's callbacks is not the phase's business but the job's ``Outbox``'s (one
/// drainer at a time); the phase only says which of them may run now: none before the start;
/// while `main()` runs, only the per-task callbacks its own `track` calls route on its thread;
/// once it returned, all of them, on whichever thread drains.
enum JobPhase {
  /// Not started. (Whether a queue holds it is the operation's queue claim, not the phase's.)
  case idle(stop: JobStop?)
  /// `main()` runs on `thread`.
  case runningMain(thread: UInt, stop: JobStop?)
  /// `main()` returned: every callback may run.
  case mainReturned(stop: JobStop?)
  case finished

  static let initial = JobPhase.idle(stop: nil)

  /// Why the job stops early, if it does. Once set, no routing callback runs any more.
  var stop: JobStop? {
    switch self {
    case .idle(let stop), .runningMain(_, let stop), .mainReturned(let stop): return stop
    case .finished: return nil
    }
  }

  var isStopping: Bool { stop != nil }

  /// Why the job stops, as handed down to what it cancels: a failing stop's error; `nil` for a
  /// cancel (its reason is the operation's `cancellationReason`) or while it does not stop.
  var stopError: (any Error)? {
    if case .failed(let error)? = stop { return error }
    return nil
  }

  var isFinished: Bool {
    if case .finished = self { return true }
    return false
  }

  /// Not started yet.
  var isIdle: Bool {
    if case .idle = self { return true }
    return false
  }

  var isRunningMain: Bool {
    if case .runningMain = self { return true }
    return false
  }

  /// Whether group callbacks, `allTasksFinished()` and the finish may run: `main()` returned.
  var hasMainReturned: Bool {
    if case .mainReturned = self { return true }
    return false
  }

  /// Whether `thread` may route finished tasks now (`inTrack`: from a `track` call): once
  /// `main()` returned, any thread; while it runs, only its own thread inside a `track` call.
  func routes(for thread: UInt, inTrack: Bool) -> Bool {
    switch self {
    case .mainReturned: return true
    case .runningMain(let main, _): return inTrack && main == thread
    case .idle, .finished: return false
    }
  }

  /// The job started on `thread`. Returns `true` if `main()` must be called (`false` if the job
  /// was stopped first, or started twice).
  mutating func beginMain(on thread: UInt) -> Bool {
    guard case .idle(let stop) = self else { return false }
    self = .runningMain(thread: thread, stop: stop)
    return stop == nil
  }

  /// `main()` returned: every callback may run now.
  mutating func mainReturned() {
    guard case .runningMain(_, let stop) = self else { return }
    self = .mainReturned(stop: stop)
  }

  /// Records why the job stops. Returns `false` (and changes nothing) if it already stops or
  /// finished: the first reason wins.
  mutating func recordStop(_ reason: JobStop) -> Bool {
    switch self {
    case .idle(nil):
      self = .idle(stop: reason)
    case .runningMain(let thread, nil):
      self = .runningMain(thread: thread, stop: reason)
    case .mainReturned(nil):
      self = .mainReturned(stop: reason)
    case .idle, .runningMain, .mainReturned, .finished:
      return false
    }
    return true
  }

  mutating func finish() {
    self = .finished
  }

  /// For `debugDescription`; `queued` tells a job some queue holds from one nobody queued yet.
  func summary(queued: Bool) -> String {
    let name: String
    switch self {
    case .idle: name = queued ? "submitted" : "created"
    case .runningMain: name = "runningMain"
    case .mainReturned: name = "routing"
    case .finished: name = "finished"
    }
    switch stop {
    case nil: return name
    case .cancelled: return name + ", cancelled"
    case .failed(let error): return name + ", failed: \(error)"
    }
  }
}
