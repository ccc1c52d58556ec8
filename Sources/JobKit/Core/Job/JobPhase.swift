/// Why a job stops before its work is done.
enum JobStop {
  case cancelled
  case failed(any Error)
}

/// Where a job is in its life, why it stops early (if it does) and who may run its callbacks, as
/// one value: each case carries only what is valid in it, so a finished job holding the router,
/// or a router while nobody started the job, cannot be expressed.
///
/// Routing is serial: at most one thread at a time holds the router and runs `main()` or
/// callbacks. The router is held from creation until `main()` returned; while `main()` runs, its
/// own `track` calls may route per-task callbacks on its thread (`routing: true`).
enum JobPhase {
  /// Not started. (Whether a queue holds it is the operation's queue claim, not the phase's.)
  case idle(stop: JobStop?)
  /// `main()` runs on `thread`; `routing` while one of its `track` calls routes.
  case runningMain(thread: UInt, routing: Bool, stop: JobStop?)
  /// `main()` returned. `routerHeld` while a thread routes; otherwise the next thread that
  /// signals a finished task takes the router.
  case routing(routerHeld: Bool, stop: JobStop?)
  case finished

  static let initial = JobPhase.idle(stop: nil)

  /// Why the job stops early, if it does. Once set, no routing callback runs any more.
  var stop: JobStop? {
    switch self {
    case .idle(let stop), .runningMain(_, _, let stop), .routing(_, let stop): return stop
    case .finished: return nil
    }
  }

  var isStopping: Bool { stop != nil }

  var isFinished: Bool {
    if case .finished = self { return true }
    return false
  }

  var isRunningMain: Bool {
    if case .runningMain = self { return true }
    return false
  }

  /// The job started on `thread`. Returns `true` if `main()` must be called (`false` if the job
  /// was stopped first, or started twice).
  mutating func beginMain(on thread: UInt) -> Bool {
    guard case .idle(let stop) = self else { return false }
    self = .runningMain(thread: thread, routing: false, stop: stop)
    return stop == nil
  }

  /// `main()` returned; its thread keeps the router and routes.
  mutating func mainReturned() {
    guard case .runningMain(_, _, let stop) = self else { return }
    self = .routing(routerHeld: true, stop: stop)
  }

  /// Records why the job stops. Returns `false` (and changes nothing) if it already stops or
  /// finished: the first reason wins.
  mutating func recordStop(_ reason: JobStop) -> Bool {
    switch self {
    case .idle(nil):
      self = .idle(stop: reason)
    case .runningMain(let thread, let routing, nil):
      self = .runningMain(thread: thread, routing: routing, stop: reason)
    case .routing(let routerHeld, nil):
      self = .routing(routerHeld: routerHeld, stop: reason)
    case .idle, .runningMain, .routing, .finished:
      return false
    }
    return true
  }

  /// A finished task waits to be routed: returns `true` if the calling thread takes the router
  /// (nobody holds it), `false` if the holder will route the task.
  mutating func takeRouterIfFree() -> Bool {
    guard case .routing(routerHeld: false, let stop) = self else { return false }
    self = .routing(routerHeld: true, stop: stop)
    return true
  }

  /// The router has nothing left to route.
  mutating func releaseRouter() {
    guard case .routing(routerHeld: true, let stop) = self else { return }
    self = .routing(routerHeld: false, stop: stop)
  }

  /// A `track` call on `thread`: returns `true` if `thread` runs `main()` and is not routing
  /// already; it then routes finished tasks until ``endRoutingInMain()``.
  mutating func beginRoutingInMain(on thread: UInt) -> Bool {
    guard case .runningMain(thread, routing: false, let stop) = self else { return false }
    self = .runningMain(thread: thread, routing: true, stop: stop)
    return true
  }

  mutating func endRoutingInMain() {
    guard case .runningMain(let thread, routing: true, let stop) = self else { return }
    self = .runningMain(thread: thread, routing: false, stop: stop)
  }

  /// Whether `main()`'s `track` call routes right now (see ``beginRoutingInMain(on:)``).
  var isRoutingInMain: Bool {
    if case .runningMain(_, routing: true, _) = self { return true }
    return false
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
    case .routing: name = "routing"
    case .finished: name = "finished"
    }
    switch stop {
    case nil: return name
    case .cancelled: return name + ", cancelled"
    case .failed(let error): return name + ", failed: \(error)"
    }
  }
}
