import Foundation

/// Something that wants to know when a ``ConcurrentOperation`` finished: a job tracking it, or a
/// task awaiting it. Called once, after the operation's `isFinished` became `true` and its KVO
/// notifications were posted, with no JobKit lock held.
protocol OperationFinishObserver: AnyObject, Sendable {
  func operationDidFinish(_ operation: ConcurrentOperation)
  /// As ``operationDidFinish(_:)``, with the error the operation finished with (so that an
  /// observer need not take the operation's lock to read it). Calls that by default.
  func operationDidFinish(_ operation: ConcurrentOperation, error: (any Error)?)
  /// The job this observer belongs to, if any: a job observes an operation at most once.
  var observingJob: ObjectIdentifier? { get }
}

extension OperationFinishObserver {
  var observingJob: ObjectIdentifier? { nil }

  func operationDidFinish(_ operation: ConcurrentOperation, error: (any Error)?) {
    operationDidFinish(operation)
  }
}

/// Something that wants to know when a ``ConcurrentOperation`` starts (a job whose events are
/// listened to; several jobs may track one operation). Called once, before `operationStart()`,
/// with no JobKit lock held, in the order the observers were added.
protocol OperationStartObserver: AnyObject, Sendable {
  func operationDidStart(_ operation: ConcurrentOperation)
}

/// The state of one ``ConcurrentOperation``, changed only by the pure transitions below, each of
/// which returns what the caller must do once the lock is released.
struct OperationState {
  enum Phase: Equatable {
    /// Not started yet. `cancelled`: `cancel()`'s transition ran meanwhile (a start also skips
    /// the work after a cancel's first step, `recordCancel`, or when the operation's overridden
    /// `isCancelled`, read before the lock, said so).
    case idle(cancelled: Bool)
    /// Inside `operationStart()`. A `cancel()` arriving now is remembered and passed to
    /// `operationCancelled()` after `operationStart()` returns.
    case starting(cancelPending: Bool)
    /// `operationStart()` returned; waiting for `operationDone`.
    case running(cancelCalled: Bool)
    /// Started by its queue while suspended: `operationStart()` waits for `resume()` (see
    /// `OperationState+Suspension.swift`); the operation counts as executing meanwhile.
    case deferred
    case finished

    var isIdle: Bool {
      if case .idle = self { return true }
      return false
    }
  }

  /// Zero, one or many observers, without an array allocation for the common single observer.
  enum Observers {
    case none
    case one(any OperationFinishObserver)
    case many([any OperationFinishObserver])

    var all: [any OperationFinishObserver] {
      switch self {
      case .none: return []
      case .one(let observer): return [observer]
      case .many(let observers): return observers
      }
    }

    /// Whether any observer satisfies `predicate` (no array is made for one observer).
    func contains(where predicate: (any OperationFinishObserver) -> Bool) -> Bool {
      switch self {
      case .none: return false
      case .one(let observer): return predicate(observer)
      case .many(let observers): return observers.contains(where: predicate)
      }
    }

    /// Calls `body` with each observer, in registration order.
    func notifyEach(_ body: (any OperationFinishObserver) -> Void) {
      switch self {
      case .none: break
      case .one(let observer): body(observer)
      case .many(let observers): observers.forEach(body)
      }
    }
  }

  var phase = Phase.idle(cancelled: false)
  private(set) var error: (any Error)?
  /// Why the operation was stopped: the first reason recorded before it finished (a
  /// `cancel(reason:)`, a parent's reason handed down), or `CancellationError` for a plain
  /// `cancel()`; for a job that a failing stop stopped, that stop's error
  /// (`recordFailingStop`, in the same transition as the stop). `nil` until then.
  private(set) var cancellationReason: (any Error)?
  private(set) var observers = Observers.none
  /// Told when the operation starts, then dropped (empty for an operation nobody's events
  /// observe: no allocation).
  var startObservers: [any OperationStartObserver] = []
  /// A job claimed the right to add the operation to a queue (see `addObserver(_:claimingQueue:)`).
  private(set) var queueClaimed = false
  private(set) var misuses: [JobKitError] = []
  /// `suspend()` / `resume()` (see `OperationState+Suspension.swift`).
  var suspension = OperationSuspension()
  /// The operation's `qualityOfService` as last set (Foundation's own is behind Foundation's
  /// lock): the class a job starts it at when it starts it itself.
  private(set) var qualityOfService = QualityOfService.default
  /// `addDependency(_:)` was called (a dependency removed since still counts).
  private(set) var hadDependency = false
  var isExecuting: Bool {
    switch phase {
    case .starting, .running, .deferred: return true
    case .idle, .finished: return false
    }
  }

  var isFinished: Bool { phase == .finished }

  /// Whether `cancel()` was recorded before the operation finished (passed on to `operationCancelled()` or not yet).
  var isCancelRecorded: Bool {
    switch phase {
    case .idle(cancelled: true), .starting(cancelPending: true), .running(cancelCalled: true): return true
    case .idle, .starting, .running, .deferred, .finished: return false
    }
  }

  enum StartAction {
    /// Run `operationStart()`, after telling the start observers.
    case run([any OperationStartObserver])
    /// Cancelled before it started: finish without running. `dropped` are the start observers,
    /// no longer needed, handed out so that their release (one may hold the last reference to
    /// a job) happens after the lock.
    case skipCancelled(dropped: [any OperationStartObserver])
    case alreadyStarted
    /// Suspended: `operationStart()` waits for `resume()` (or a cancel); nothing to do now.
    case deferred
  }

  /// `qualityOfService` was set.
  mutating func qualityOfServiceSet(to qualityOfService: QualityOfService) {
    self.qualityOfService = qualityOfService
  }

  /// `addDependency(_:)` was called.
  mutating func dependencyAdded() {
    hadDependency = true
  }

  /// `start()` was called. Whatever it returns (but `alreadyStarted`), the start observers are
  /// taken out of the state: an operation is started once, so it is never needed again.
  ///
  /// A cancel counts from its first step (`recordCancel`, which `cancel()` runs before
  /// Foundation's own `cancel()`), or if `isCancelled`: the operation's `isCancelled`, read by
  /// the caller before it took the lock, for a subclass that may override it.
  mutating func start(isCancelled: Bool = false) -> StartAction {
    guard case .idle(let cancelledWhileIdle) = phase else { return .alreadyStarted }
    let isCancelled = isCancelled || isCancelRequested
    if suspension.isSuspended, !isCancelled, !cancelledWhileIdle {
      phase = .deferred
      return .deferred
    }
    phase = .starting(cancelPending: false)
    let observers = exchange(&startObservers, with: [])
    if isCancelled || cancelledWhileIdle { return .skipCancelled(dropped: observers) }
    return .run(observers)
  }

  /// Adds a start observer (after those added before: each job that tracks the operation while
  /// its events are listened to adds one). Returns `false` when the operation already started.
  mutating func addStartObserver(_ observer: any OperationStartObserver) -> Bool {
    guard phase.isIdle || phase == .deferred else { return false }
    startObservers.append(observer)
    return true
  }

  /// `operationStart()` returned. Returns `true` when a cancel arrived meanwhile and must now be
  /// passed to `operationCancelled()`.
  mutating func operationStartReturned() -> Bool {
    guard case .starting(let cancelPending) = phase else { return false }
    phase = .running(cancelCalled: cancelPending)
    return cancelPending
  }

  /// `cancel()` was called before the operation finished. A stop that is not a cancel (a job's
  /// `fail(_:)` or time limit) records a `cancellationReason` but not this.
  private(set) var isCancelRequested = false

  /// `cancel()` was called: records that it was (unless the operation finished) and
  /// `CancellationError` as the reason if there is none. Returns the reason not kept, for the
  /// caller to release after the lock.
  mutating func recordCancel() -> (any Error)? {
    if phase != .finished {
      isCancelRequested = true
    }
    return recordCancellationReason(CancellationError())
  }

  /// Records `reason` as why the operation stops, unless it finished or already has a reason
  /// (the first wins). Returns the reason not kept, for the caller to release after the lock
  /// (an error is a user's value: its `deinit` may be user code).
  mutating func recordCancellationReason(_ reason: any Error) -> (any Error)? {
    guard phase != .finished, cancellationReason == nil else { return reason }
    cancellationReason = reason
    return nil
  }

  /// A job's failing stop (`fail(_:)`, a time limit, a `.failFast` failure) is recorded in its
  /// job state with `error`, in the same transition: the job ends with that error, so it
  /// becomes the reason, replacing one a cancel wrote first (so that `error` and
  /// `cancellationReason` agree). Nothing changes once the operation finished. Returns the
  /// reason replaced, or `error` if not kept, for the caller to release after the lock.
  mutating func recordFailingStop(_ error: any Error) -> (any Error)? {
    guard phase != .finished else { return error }
    let replaced = cancellationReason
    cancellationReason = error
    return replaced
  }

  enum CancelAction {
    case none
    /// Call `operationCancelled()` now.
    case callOperationCancelled
    /// The operation waited for `resume()` to start: finish it now, as a cancelled start
    /// (`start()`'s `skipCancelled` path), on the cancelling thread. `dropped`: as for
    /// `StartAction.skipCancelled`.
    case finishDeferred(dropped: [any OperationStartObserver])
  }

  /// `cancel()` was called. Ends a suspension (a cancelled operation is not suspended).
  mutating func cancel() -> CancelAction {
    suspension.flag.clearQuietly()
    switch phase {
    case .deferred:
      phase = .starting(cancelPending: false)
      return .finishDeferred(dropped: exchange(&startObservers, with: []))
    case .starting:
      phase = .starting(cancelPending: true)
      return .none
    case .running(cancelCalled: false):
      phase = .running(cancelCalled: true)
      return .callOperationCancelled
    case .idle:
      phase = .idle(cancelled: true)
      return .none
    case .running(cancelCalled: true), .finished:
      return .none
    }
  }

  enum FinishAction {
    case notify(Observers)
    case misuse(JobKitError.Code)
  }

  mutating func finish(error: (any Error)?) -> FinishAction {
    switch phase {
    case .idle, .deferred:
      return .misuse(.finishedBeforeStart)
    case .finished:
      return .misuse(.finishedTwice)
    case .starting, .running:
      phase = .finished
      suspension.flag.clearQuietly()  // a finished operation is not suspended
      self.error = error
      let toNotify = observers
      observers = .none
      return .notify(toNotify)
    }
  }

  /// Registers an observer. Returns `false` (and registers nothing) when already finished.
  mutating func addObserver(_ observer: any OperationFinishObserver) -> Bool {
    guard phase != .finished else { return false }
    switch observers {
    case .none: observers = .one(observer)
    case .one(let first): observers = .many([first, observer])
    case .many(var all):
      observers = .none
      all.append(observer)
      observers = .many(all)
    }
    return true
  }

  enum JobObservation: Equatable {
    /// Registered; `claimed` unless the queueing was claimed by another job first.
    case observing(claimed: Bool)
    /// The observer's job already observes the operation: nothing registered.
    case alreadyObserved
    /// The operation finished: nothing registered.
    case finished
  }

  /// Registers a job's observer; if `claimingQueue`, also claims the right to add the operation
  /// to a queue, which only one job gets (adding an operation to two queues is a fatal error in
  /// Foundation). A job that already observes the operation registers nothing.
  mutating func addObserver(_ observer: any OperationFinishObserver, claimingQueue: Bool) -> JobObservation {
    guard phase != .finished else { return .finished }
    if let job = observer.observingJob, observers.contains(where: { $0.observingJob == job }) {
      return .alreadyObserved
    }
    _ = addObserver(observer)
    guard claimingQueue else { return .observing(claimed: true) }
    if queueClaimed { return .observing(claimed: false) }
    queueClaimed = true
    return .observing(claimed: true)
  }

  mutating func removeObserver(_ observer: any OperationFinishObserver) {
    let remaining = observers.all.filter { $0 !== observer }
    switch remaining.count {
    case 0: observers = .none
    case 1: observers = .one(remaining[0])
    default: observers = .many(remaining)
    }
  }

  /// See ``ConcurrentOperation/detach(_:releasingClaim:)``. Nothing is freed here: the detaching
  /// job's `deinit` still holds `observer`.
  mutating func detach(_ observer: any OperationFinishObserver & OperationStartObserver, releasingClaim: Bool) {
    removeObserver(observer)
    startObservers.removeAll { $0 === observer }
    if releasingClaim, phase.isIdle {
      queueClaimed = false
    }
  }

  /// Claims the right to add the operation to a queue for a caller that does not track it (a
  /// job's `startJob`/`run()`, or `run()`/`runAndWait()` on a task). Returns `false` when a job
  /// or an earlier call already claimed it, or the operation already started.
  mutating func claimQueue() -> Bool {
    guard phase.isIdle, !queueClaimed else { return false }
    queueClaimed = true
    return true
  }

  /// Records a misuse of the operation (``ConcurrentOperation/misuses``).
  mutating func recordMisuse(_ error: JobKitError) {
    misuses.append(error)
  }
}
