import Foundation

/// A base class for asynchronous operations: subclass it, override ``operationStart()`` to begin
/// the work, and call ``operationDone(error:)`` from any thread once the work is done.
///
/// - ``operationStart()`` is called at most once, on the thread that called `start()` (a queue's
///   worker thread), and never if the operation was cancelled before it started: such an operation
///   finishes at once, with ``error`` `nil` and `isCancelled` `true`. If the operation was
///   suspended when started (``suspend()``), it is called later, on the thread that calls
///   ``resume()``, or never if a cancel comes first.
/// - ``operationCancelled()`` is called at most once, only for an operation that started and has
///   not finished, never at the same time as ``operationStart()``: a `cancel()` that arrives while
///   ``operationStart()`` runs is passed on right after it returns.
/// - ``operationDone(error:)`` may be called from any thread; only the first call counts.
///
/// Dependencies, `completionBlock`, `waitUntilFinished()` and serial queues work with it as with
/// any `Operation`. Misuse (starting twice, finishing twice, finishing before starting) is
/// reported through ``JobKitDiagnostics`` and recorded in ``misuses``; it never crashes.
/// An example and how the finish is signalled: <doc:TaskRules>.
open class ConcurrentOperation: Operation, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in `lockedState`, only touched under the
  // operation's mutex (`SharedLocks`), and in `directStarter` (see there).
  /// Only touched under the operation's mutex in `SharedLocks`, through ``state``. Exclusivity
  /// unchecked: that mutex already excludes other accesses. Unused by a job, whose operation
  /// state is part of its `JobState`.
  @exclusivity(unchecked) private var lockedState = OperationState()
  /// The operation is a job: its state is part of its `JobState`, not `lockedState`. Its own
  /// field, not one of `lockedState`'s: it is read with no lock, and reading a field of a value
  /// another thread writes under the lock is a race (a debug build copies the whole value).
  /// Written by a job's inits before the job is shared, never after. Exclusivity unchecked: no
  /// write after it is shared.
  @exclusivity(unchecked) private var stateIsInJob = false

  /// The operation's state, reached with `state.withLock { … }`.
  var state: OperationStateAccess { OperationStateAccess(operation: Unmanaged.passUnretained(self)) }

  /// Runs `body` on the state under the lock that guards it (see ``state``): the operation's
  /// mutex in `SharedLocks`, or a job's own lock (`JobController.withOperationState`).
  final func withStateLocked<Result>(_ body: (inout OperationState) -> Result) -> Result {
    // A job's own state is reached a few times per job, never per task: the cast is paid there.
    if stateIsInJob { return (self as! JobController).withOperationState(body) }
    return SharedLocks.withLock(for: self) { body(&lockedState) }
  }

  /// Called by a job's inits, before the job is shared: its state is part of its `JobState`.
  final func moveStateIntoJob() {
    stateIsInJob = true
  }
  /// The job that starts this operation itself, in no queue (`JobController.enqueue`), from its
  /// hand-off to a worker thread until that worker takes it: written before the hand-off, read and
  /// cleared on the worker after it (the dispatch queue orders the two), touched by nothing else.
  /// Exclusivity unchecked: never accessed by two threads at once.
  @exclusivity(unchecked) var directStarter: JobController?

  /// Creates an operation that is ready to be added to a queue (or started with `start()`).
  public override init() {
    super.init()
  }

  // MARK: - Operation overrides

  /// Always `true`: the operation finishes when ``operationDone(error:)`` is called, not when
  /// `start()` returns.
  public final override var isAsynchronous: Bool { true }

  /// `true` from the moment `start()` begins until ``operationDone(error:)``.
  public final override var isExecuting: Bool { state.withLock { $0.isExecuting } }

  /// `true` once ``operationDone(error:)`` was called (or the operation was cancelled before it
  /// started and has been started by its queue).
  public final override var isFinished: Bool {
    // Foundation reads it back inside the finish's change notification: answered there, on the
    // finishing thread, with no lock (see `whilePostingFinish`).
    isPostingFinish || state.withLock { $0.isFinished }
  }

  /// As `Operation`'s. The operation also keeps the class in its own state: a job that starts it
  /// itself, in no queue, starts it at that class. An override's setter must call `super`.
  open override var qualityOfService: QualityOfService {
    get { super.qualityOfService }
    set {
      super.qualityOfService = newValue
      state.withLock { $0.qualityOfServiceSet(to: newValue) }
    }
  }

  /// As `Operation`'s. The operation also records that it was given a dependency: a job that
  /// starts it itself then asks `isReady` first. Overrides must call `super`.
  open override func addDependency(_ operation: Operation) {
    state.withLock { $0.dependencyAdded() }
    super.addDependency(operation)
  }

  /// The error given to ``operationDone(error:)``, if any. `nil` while the operation runs, after a
  /// successful finish, and after a cancel before start.
  public var error: (any Error)? { state.withLock { $0.error } }

  /// Every misuse of this operation that JobKit detected, in the order detected. Empty when the
  /// operation was used correctly. See ``JobKitError/Code`` for each outcome.
  public var misuses: [JobKitError] { state.withLock { $0.misuses } }

  /// Starts the operation. Called by the queue the operation was added to; call it yourself only
  /// for an operation that is in no queue.
  ///
  /// Calls ``operationStart()`` on the calling thread unless the operation was cancelled first.
  /// A second call is reported as ``JobKitError/Code/startedTwice`` and ignored.
  public final override func start() {
    start(inQueue: true)
  }

  /// `start()` for an operation its job starts itself, in no queue (`JobController.enqueue`).
  func startOutsideQueue() {
    start(inQueue: false)
  }

  private func start(inQueue: Bool) {
    // Foundation's `isCancelled` (its lock) is read only where a subclass may override it.
    let isCancelled = inheritsFoundationsAnswers ? false : self.isCancelled
    let action = state.withLock { $0.start(isCancelled: isCancelled) }
    switch action {
    case .alreadyStarted:
      reportMisuse(.startedTwice, "start() was called on an operation that already started; ignored")
      return
    case .run(let observers):
      postExecutingChange(inQueue: inQueue)
      runStart(telling: observers)
    case .skipCancelled:
      postExecutingChange(inQueue: inQueue)
      setFoundationsCancelFlag()
      startCancelled()
      startReturned()
    case .deferred:
      // Suspended: `resume()` (or a cancel) runs the start, maybe on another thread already.
      postExecutingChange(inQueue: inQueue)
    }
  }

  /// Runs ``operationStart()`` (after telling the start observers), then calls ``operationCancelled()`` for a cancel that
  /// arrived meanwhile. On `start()`'s thread, or on `resume()`'s for a deferred start.
  func runStart(telling observers: [any OperationStartObserver]) {
    for observer in observers {
      observer.operationDidStart(self)
    }
    operationStart()
    startReturned()
  }

  private func startReturned() {
    if state.withLock({ $0.operationStartReturned() }) {
      operationCancelled()
    }
  }

  /// Cancels the operation: sets `isCancelled`, and if the operation is running, calls
  /// ``operationCancelled()`` (once). An operation that did not start yet will finish as soon as
  /// its queue starts it, without calling ``operationStart()``. Calling it again, or after the
  /// operation finished, has no further effect.
  ///
  /// Records `CancellationError` as ``cancellationReason`` unless a reason was recorded first
  /// (see ``cancel(reason:)``).
  public final override func cancel() {
    let unused = state.withLock { $0.recordCancel() }
    _ = unused  // released after the lock
    super.cancel()
    cancellationRequested()
    switch state.withLock({ $0.cancel() }) {
    case .none:
      break
    case .callOperationCancelled:
      operationCancelled()
    case .finishDeferred(let dropped):
      _ = dropped  // released here, after the lock
      startCancelled()
      startReturned()
    }
  }

  /// Cancels the operation as `cancel()` does, recording `reason` as its
  /// ``cancellationReason``: ``JobController/run()`` and ``waitForFinish()`` throw it, a job hands
  /// it down to every task and nested job it cancels, and its `taskFinished` event carries it.
  ///
  /// The first reason wins: a later `cancel(reason:)`, a ``JobController/fail(_:)`` after it, or
  /// a cancel after the operation finished keeps the reason there is. A job that a failure
  /// stopped first (its `fail(_:)`, time limit or a ``FailurePolicy/failFast`` task, racing this
  /// call) fails, and its reason is that failure's error. Safe from any thread.
  public final func cancel(reason: any Error) {
    let unused = state.withLock { $0.recordCancellationReason(reason) }
    _ = unused  // released after the lock
    cancel()
  }

  /// Why the operation was stopped, or `nil` if it was not (or only after it finished): the
  /// reason given to ``cancel(reason:)``; for a job, the error given to
  /// ``JobController/fail(_:)``, ``JobKitError/Code/timeLimitExceeded`` when its
  /// ``JobController/timeLimit`` ran out, or the failing task's error under
  /// ``FailurePolicy/failFast``; for a task or nested job a job stopped, the job's reason;
  /// `CancellationError` after a plain `cancel()`. The first reason recorded stays, except that
  /// a job that a failure stopped has that failure's error, its ``error``, as its reason.
  public var cancellationReason: (any Error)? { state.withLock { $0.cancellationReason } }

  /// How the operation ended, in one read of its state: its error, and whether `cancel()` was
  /// called before it finished (a job's `fail(_:)` or time limit records a
  /// ``cancellationReason`` without a cancel). For a job routing it as a task.
  var finishOutcome: (error: (any Error)?, cancelled: Bool) {
    state.withLock { ($0.error, $0.isCancelRequested) }
  }

  /// Suspends the operation: if its queue starts it while suspended, ``operationStart()`` waits
  /// until ``resume()`` (the operation counts as executing and keeps its queue slot meanwhile);
  /// if it runs already, it goes on, unless the subclass pauses it (override and call `super`,
  /// or read ``isSuspended``). A ``JobController`` also holds back the tasks it would queue and
  /// suspends its tracked child operations (see <doc:PoliciesAndObservation>).
  ///
  /// Safe from any thread; idempotent. Does nothing on a finished or cancelled operation, nor on
  /// a job that ``JobController/fail(_:)`` stopped. A `cancel()` (or a job's `fail(_:)`) ends
  /// the suspension: a deferred operation then finishes at once, without running its work.
  /// Overrides must call `super`.
  open func suspend() {
    applySuspend()
  }

  /// Ends a ``suspend()``: a start that waited runs now, on the calling thread, before `resume()`
  /// returns; a ``JobController`` queues the tasks it held back and resumes its children.
  ///
  /// Safe from any thread; a no-op unless suspended (so on a finished or cancelled operation).
  /// Overrides must call `super`.
  open func resume() {
    applyResume()
  }

  // MARK: - Subclass contract

  /// Override to begin the operation's work; call ``operationDone(error:)`` when it is done,
  /// from this method or later from any thread.
  ///
  /// Called at most once, on the thread that started the operation (or, for an operation
  /// suspended when started, on the thread that resumed it), and not at all if the operation was
  /// cancelled before it started. The default implementation finishes at once.
  open func operationStart() {
    operationDone()
  }

  /// Override to react to `cancel()` while the operation runs: stop the work (invalidate a timer,
  /// cancel a request) and call ``operationDone(error:)``.
  ///
  /// Called at most once, after ``operationStart()`` returned and before the operation finished,
  /// on the thread that called `cancel()` (or, if the cancel arrived during
  /// ``operationStart()``, on that thread right after it returned). The default implementation
  /// does nothing: the operation runs to its end, and `isCancelled` tells it what happened.
  open func operationCancelled() {}

  /// Marks the operation finished, with an optional error. Safe to call from any thread.
  ///
  /// Only the first call counts. A later call, or a call before the operation started, changes
  /// nothing and is reported (``JobKitError/Code/finishedTwice``,
  /// ``JobKitError/Code/finishedBeforeStart``).
  ///
  /// Once the state says finished, the `isExecuting`/`isFinished` change notifications are
  /// posted (releasing dependents, `waitUntilFinished()`, the queue slot and `completionBlock`),
  /// then a job tracking this operation is told. That job may run its callbacks on this thread
  /// before this method returns, so do not call it while holding a lock those callbacks need.
  /// Called while another operation's finish is being told on this thread (inside a job's
  /// callback or router, which is where a nested job finishes), the job tracking this operation
  /// is told on this thread right after that one, so finishes of nested jobs never pile up on the
  /// stack (see <doc:RoutingAndThreads>).
  public final func operationDone(error: (any Error)? = nil) {
    finished(state.withLock { $0.finish(error: error) }, error: error)
  }

  /// ``operationDone(error:)`` for a subclass that records its outcome first: `record` runs
  /// under the operation's mutex (it must only touch the subclass's state guarded by it, see
  /// `SharedLocks`; never for a job); unless it returns `false`, the operation then finishes
  /// with `error` under the same lock. Returns what `record` returned.
  final func operationDone(error: (any Error)?, recordingFirst record: () -> Bool) -> Bool {
    let action = state.withLock { state in record() ? state.finish(error: error) : nil }
    guard let action else { return false }
    finished(action, error: error)
    return true
  }

  /// Carries out what the finish transition returned, with no lock held.
  private func finished(_ action: OperationState.FinishAction, error: (any Error)?) {
    switch action {
    case .misuse(let code):
      let what =
        code == .finishedTwice
        ? "operationDone() was called on an operation that already finished; ignored"
        : "operationDone() was called before the operation started; ignored"
      reportMisuse(code, what)
    case .notify(let observers):
      postFinishChange()
      Trampoline.notify(observers, of: self, error: error)
    }
  }

  // MARK: - Internal hooks

  /// Whether `cancel()` was recorded while the operation had not finished, including a cancel
  /// whose call of ``operationCancelled()`` waits for ``operationStart()`` to return. Read
  /// from the operation's own state (never Foundation's `isCancelled`, which takes Foundation's
  /// lock); `cancel()` records it before it returns.
  var isCancelRecorded: Bool { state.withLock { $0.isCancelRecorded } }

  /// Whether `isReady` and `isCancelled` are Foundation's own (dependencies only; `cancel()`):
  /// `true` only for JobKit's own classes that override neither and that no user subclassed.
  var inheritsFoundationsAnswers: Bool { false }

  /// Called (on every `cancel()`) before ``operationCancelled()``; lets a job cancel its tasks
  /// even while its `main()` runs. Must be idempotent.
  func cancellationRequested() {}

  /// Called after ``suspend()`` or ``resume()`` changed ``isSuspended`` (never for a cancel), with
  /// no lock held, with that change's generation: changes racing on other threads may arrive out
  /// of order, and the subclass drops one older than the last it applied. Does nothing by
  /// default.
  func suspensionChanged(to isSuspended: Bool, generation: UInt64) {}

  /// A job skips the operation, which it tracked with dependencies, because one of them failed
  /// or was cancelled (`error`, ``JobKitError/Code/dependencyFailed``, names it): cancels it, so
  /// that it finishes without running once queued. Called once, before the operation was
  /// queued, with no lock held. A subclass with an outcome of its own records `error` first.
  func skipForFailedDependency(_ error: JobKitError) {
    cancel()
  }

  /// Called instead of ``operationStart()`` when the operation was cancelled before it started.
  func startCancelled() {
    operationDone()
  }

  /// Registers `observer` to be told when the operation finishes. Returns `false` when it has
  /// already finished (the observer is then not called).
  func addFinishObserver(_ observer: any OperationFinishObserver) -> Bool {
    state.withLock { $0.addObserver(observer) }
  }

  /// Registers a job's `observer` and, if `claimingQueue`, claims the right to queue the
  /// operation. See ``OperationState/JobObservation``.
  func addFinishObserver(
    _ observer: any OperationFinishObserver, claimingQueue: Bool
  ) -> OperationState.JobObservation {
    state.withLock { $0.addObserver(observer, claimingQueue: claimingQueue) }
  }

  /// Registers `observer` to be told when the operation starts (besides those registered
  /// before). Returns `false` if it started.
  func addStartObserver(_ observer: any OperationStartObserver) -> Bool {
    state.withLock { $0.addStartObserver(observer) }
  }

  func removeFinishObserver(_ observer: any OperationFinishObserver) {
    state.withLock { $0.removeObserver(observer) }
  }

  /// A job freed before it finished lets go of the operation: `node` no longer observes its start
  /// or finish and, if `releasingClaim`, the queueing its job claimed is given back (unless the
  /// operation started: someone else queued it).
  func detach(_ node: TaskNode, releasingClaim: Bool) {
    state.withLock { $0.detach(node, releasingClaim: releasingClaim) }
  }

  /// Records a misuse on this operation and passes it to ``JobKitDiagnostics``.
  func reportMisuse(_ code: JobKitError.Code, _ message: String) {
    let error = JobKitError(code, message: message)
    state.withLock { $0.recordMisuse(error) }
    JobKitDiagnostics.report(error, for: self)
  }
}

extension Operation {
  /// Cancels the operation with `reason` if it is a ``ConcurrentOperation`` (which records it as
  /// its ``ConcurrentOperation/cancellationReason``), else plainly: how a job hands its reason
  /// down to the tasks it stops.
  func cancel(handingDown reason: any Error) {
    if let operation = self as? ConcurrentOperation {
      operation.cancel(reason: reason)
    } else {
      cancel()
    }
  }
}
