import Foundation

/// A serial chain of asynchronous steps, each getting the previous step's result, with one error
/// handler and one completion handler. See <doc:MigratingFromBlockSequence>.
///
/// Build it with ``start(_:)`` and ``then(_:)->Pipeline<Next>``, set the error handler with
/// ``onError(_:)`` (and, if you need it, the cancellation handler with ``onCancelled(_:)``), and
/// start it with ``finally(_:)`` (or await ``run()``):
///
/// ```swift
/// Pipeline.start { try await download(url) }          // Data
///     .then { data in try decode(data) }                // Data -> Feed
///     .onError { error in log("failed: \(error)") }
///     .finally { feed in show(feed) }
/// ```
///
/// The steps run one at a time, in the order they were added, in one Swift task. Exactly one
/// outcome follows: every step returned (the `finally` handler), a step threw (the `onError`
/// handler), or the pipeline was cancelled (the `onCancelled` handler). That handler runs once,
/// and the pipeline finishes after it returned. Misuse never crashes.
/// The rules in full (threads, cancel, building, memory): <doc:PipelineRules>.
public final class Pipeline<Output: Sendable>: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: all mutable state is `pipelineState`, only touched under its stripe lock;
  // the rest is immutable.
  /// Only touched in `withState`, under its stripe lock (a pipeline is made per `then`, and a
  /// lock of its own would cost a third of that).
  private var pipelineState: PipelineState<Output>
  /// Where the steps run, or `nil` for Swift's global concurrent executor.
  let stepExecutor: PipelineStepExecutor?

  init(
    plan: PipelineState<Output>.Plan,
    handlers: PipelineHandlers,
    stepExecutor: PipelineStepExecutor?
  ) {
    pipelineState = PipelineState(plan: plan, errorHandler: handlers.error, cancelHandler: handlers.cancel)
    self.stepExecutor = stepExecutor
    super.init()
  }

  /// Runs `body` on the state under the pipeline's stripe lock. `body` must not call user code.
  func withState<Result>(_ body: (inout PipelineState<Output>) -> Result) -> Result {
    SharedLocks.withLock(for: self) { body(&pipelineState) }
  }

  // MARK: - Building

  /// Creates a pipeline whose first step is `body`. Its steps run on Swift's global concurrent
  /// executor. Nothing runs until the pipeline is started.
  public static func start(_ body: @escaping @Sendable () async throws -> Output) -> Pipeline<Output> {
    Pipeline(plan: .steps(firstStep(body)), handlers: PipelineHandlers(), stepExecutor: nil)
  }

  /// Creates a pipeline whose first step is `body`, and whose steps (this one and those added
  /// with ``then(_:)->Pipeline<Next>``) all run on `queue`: every part of a step between two suspension points
  /// runs as a work item on `queue`. Use a serial queue to keep each step on one queue at a time
  /// with other work. Nothing runs until the pipeline is started.
  @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
  public static func start(
    on queue: DispatchQueue,
    _ body: @escaping @Sendable () async throws -> Output
  ) -> Pipeline<Output> {
    Pipeline(
      plan: .steps(firstStep(body)), handlers: PipelineHandlers(), stepExecutor: PipelineStepExecutor(queue: queue))
  }

  private static func firstStep(
    _ body: @escaping @Sendable () async throws -> Output
  ) -> PipelineState<Output>.Steps {
    { checkpoint in
      if try checkpoint.checkpoint() { try await checkpoint.waitUntilResumed() }
      return try await body()
    }
  }

  /// Returns a new pipeline that runs this pipeline's steps, then `body` with the last one's
  /// result. The new pipeline keeps this one's step queue, error handler and `name`; this object
  /// becomes a spent builder (see the type's documentation).
  ///
  /// `body` runs at most once, in the pipeline's Swift task, after the step before it returned
  /// and only if the pipeline was not cancelled meanwhile. On a spent builder or a started
  /// pipeline, returns a pipeline that runs no step and fails with a ``JobKitError``.
  public func then<Next: Sendable>(_ body: @escaping @Sendable (Output) async throws -> Next) -> Pipeline<Next> {
    chained(body)
  }

  /// Appends `body`, a step that keeps the output type, to this pipeline and returns this
  /// pipeline, so `then` may be called several times on one value (see the type's
  /// documentation). `body` gets the result of the step added before it.
  ///
  /// `body` runs at most once, in the pipeline's Swift task, after the step before it returned
  /// and only if the pipeline was not cancelled meanwhile. On a spent builder, returns a pipeline
  /// that fails with ``JobKitError/Code/spentBuilder``; on a started pipeline, leaves it unchanged
  /// and returns a pipeline that runs no step and fails with
  /// ``JobKitError/Code/modifiedAfterStart``.
  @discardableResult
  public func then(_ body: @escaping @Sendable (Output) async throws -> Output) -> Pipeline<Output> {
    withState { $0.append(body) } ? self : chained(body)
  }

  private func chained<Next: Sendable>(_ body: @escaping @Sendable (Output) async throws -> Next) -> Pipeline<Next> {
    let handOver = withState { $0.handOver() }
    let plan: PipelineState<Next>.Plan
    switch handOver.plan {
    case .steps(let previous):
      plan = .steps { checkpoint in
        let input = try await previous(checkpoint)
        if try checkpoint.checkpoint() { try await checkpoint.waitUntilResumed() }
        return try await body(input)
      }
    case .unusable(let error):
      plan = .unusable(error)
    case .spent(let builderOutput):
      plan = .spent(builderOutput: builderOutput)
    }
    let next = Pipeline<Next>(plan: plan, handlers: handOver.handlers, stepExecutor: stepExecutor)
    if let name {
      next.name = name
    }
    return next
  }

  /// Sets the handler called, once, with the error of the first step that throws (replacing an
  /// earlier handler), and returns this pipeline.
  ///
  /// The handler runs in the pipeline's Swift task right after the failing step (on the step
  /// queue if you chose one), before the pipeline finishes; it is not called on success or after
  /// a cancel. The handler does not swallow the error: the pipeline still fails with it, so
  /// ``run()`` and ``ConcurrentOperation/waitForFinish()`` still throw it (and a job tracking the
  /// pipeline sees the failure); it only keeps the failure from being reported as unhandled. On a
  /// started pipeline, returns a new pipeline with this handler that runs no step and fails with
  /// ``JobKitError/Code/modifiedAfterStart``.
  public func onError(_ handler: @escaping @Sendable (any Error) -> Void) -> Pipeline<Output> {
    setErrorHandler(PipelineHandler(queue: nil, body: handler))
  }

  /// Like ``onError(_:)``, but the handler runs on `queue` (asynchronously, once the failing step
  /// threw); the pipeline finishes after it returned.
  public func onError(on queue: DispatchQueue, _ handler: @escaping @Sendable (any Error) -> Void) -> Pipeline<Output> {
    setErrorHandler(PipelineHandler(queue: queue, body: handler))
  }

  private func setErrorHandler(_ handler: PipelineHandler<any Error>) -> Pipeline<Output> {
    setHandler(\.errorHandler, in: \.error, to: handler, afterStart: PipelineState<Output>.errorHandlerAfterStart)
  }

  /// Sets a handler (`onError`, `onCancelled`) before the start: returns this pipeline, or, on a
  /// started one, a new pipeline with the handler that runs no step and fails with `afterStart`.
  /// The replaced handler is released after the lock.
  func setHandler<Argument>(
    _ slot: WritableKeyPath<PipelineState<Output>, PipelineHandler<Argument>?>,
    in handlersSlot: WritableKeyPath<PipelineHandlers, PipelineHandler<Argument>?>,
    to handler: PipelineHandler<Argument>,
    afterStart error: JobKitError
  ) -> Pipeline<Output> {
    let (isSet, replaced) = withState { $0.setHandler(slot, to: handler) }
    _ = replaced  // released after the lock: the user's earlier handler
    if isSet {
      return self
    }
    var handlers = PipelineHandlers()
    handlers[keyPath: handlersSlot] = handler
    return Pipeline(plan: .unusable(error), handlers: handlers, stepExecutor: stepExecutor)
  }

  // MARK: - Starting

  /// Sets the handler called, once, with the last step's result when every step succeeded, and
  /// starts the pipeline by adding it to ``JobController/sharedJobQueue``.
  ///
  /// The handler runs in the pipeline's Swift task right after the last step (on the step queue
  /// if you chose one, never on the main queue), after ``result`` was set and before the pipeline
  /// finishes; it is not called after a failure or a cancel. Call it once, on a pipeline that is
  /// in no queue or job: a second call, or one on a pipeline that already started, is ignored and
  /// reported as ``JobKitError/Code/startedTwice``.
  ///
  /// Returns this pipeline, so a script can await it in the same expression:
  /// `try await Pipeline.start { … }.finally { … }.waitForFinish()`.
  @discardableResult
  public func finally(_ handler: @escaping @Sendable (Output) -> Void) -> Pipeline<Output> {
    submit(finally: PipelineHandler(queue: nil, body: handler))
    return self
  }

  /// Like ``finally(_:)``, but the handler runs on `queue` (asynchronously, once the last step
  /// returned); the pipeline finishes after it returned. Returns this pipeline.
  @discardableResult
  public func finally(on queue: DispatchQueue, _ handler: @escaping @Sendable (Output) -> Void) -> Pipeline<Output> {
    submit(finally: PipelineHandler(queue: queue, body: handler))
    return self
  }

  private func submit(finally handler: PipelineHandler<Output>) {
    if withState({ $0.submit(finally: handler) }) {
      // A job that tracks the pipeline and queued it already starts it; the handler stays set.
      if claimQueue() {
        JobController.sharedJobQueue.addOperation(self)
      }
    } else {
      reportMisuse(
        .startedTwice,
        "finally was called on a Pipeline<\(Output.self)> that had already started; the handler was ignored"
      )
    }
  }

  /// Starts the pipeline on ``JobController/sharedJobQueue`` unless it was already started or
  /// queued (by ``finally(_:)``, an earlier `run()` or `runAndWait()`, or a job's
  /// `trackAndQueue`), then suspends until it finished and returns
  /// its ``result``.
  ///
  /// Throws the error of the step that failed (after the ``onError(_:)`` handler ran), or, if
  /// the pipeline was cancelled, its ``ConcurrentOperation/cancellationReason``
  /// (`CancellationError` after a plain `cancel()`). Cancelling the awaiting Swift task
  /// cancels the pipeline; `run()` still returns only once the pipeline finished. If you added
  /// the pipeline to a queue or a job yourself, await ``ConcurrentOperation/waitForFinish()`` and
  /// read ``result`` instead: JobKit cannot see that submission, and adding an operation to a
  /// second queue is a fatal error in Foundation.
  public func run() async throws -> Output {
    submitSelfOnce()
    do {
      try await waitForFinishCancellingOnTaskCancel()
    } catch {
      // A cancel that arrived after the last step succeeded changed nothing.
      if let result { return result }
      throw error
    }
    guard let result else {
      // Unreachable: a pipeline that finished without an error and was not cancelled succeeded.
      throw CancellationError()
    }
    return result
  }

  // MARK: - Outcome

  /// The last step's result once every step succeeded; set before ``finally(_:)``'s handler runs
  /// and before the pipeline finishes. `nil` before that, after a failure and after a cancel.
  public var result: Output? {
    withState { $0.result }
  }

  // MARK: - ConcurrentOperation

  /// Creates the Swift task that runs the steps, and returns. Called once, by the pipeline's
  /// queue; the pipeline finishes when the steps and the handler are done.
  public override func operationStart() {
    guard let steps = withState({ $0.start() }) else {
      operationDone()
      return
    }
    // The steps run with the pipeline as their enclosing operation: a job a step runs (its
    // `run()`) is cancelled with the pipeline's reason when the pipeline cancels the task.
    let runner: Task<Void, Never>
    if let stepExecutor, #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
      runner = Task(executorPreference: stepExecutor) {
        await ConcurrentOperation.$enclosingOperation.withValue(self) { await self.execute(steps) }
      }
    } else {
      runner = Task { await ConcurrentOperation.$enclosingOperation.withValue(self) { await self.execute(steps) } }
    }
    withState { $0.runnerCreated(runner) }
  }

  /// Cancels the Swift task running the steps. Called by ``ConcurrentOperation`` once, after
  /// ``operationStart()`` returned (so the task exists), on the thread that called `cancel()`, or
  /// on the starting thread for a `cancel()` that arrived while the pipeline was being started.
  public override func operationCancelled() {
    withState { $0.cancel() }?.cancel()
  }

  override func startCancelled() {
    let dropped = withState { $0.endBeforeStart() }
    PipelineHandler.call(dropped.cancelHandler, with: ()) { self.operationDone() }
    _ = dropped  // released after the lock: the steps and handlers are the user's closures
  }

  /// Runs the steps in the pipeline's Swift task, then the handler the outcome calls for, then
  /// finishes the operation.
  private func execute(_ steps: PipelineState<Output>.Steps) async {
    let outcome: Result<Output, any Error>
    do {
      outcome = .success(try await steps(self))
    } catch {
      outcome = .failure(error)
    }
    if case .failure(let error) = outcome, error is CancellationError, !isCancelRecorded {
      // A step cancelled itself: the pipeline is cancelled, as by `cancel()`.
      cancel()
    }
    // Read after the steps ended: a cancel() recorded before then counts, even one whose
    // call of `operationCancelled()` still waits for `operationStart()` to return.
    let cancelled = isCancelRecorded
    let (end, dropped) = withState { $0.stepsEnded(outcome, cancelled: cancelled) }
    _ = dropped  // released after the lock: the handler the outcome does not call
    switch end {
    case .cancelled(let handler):
      PipelineHandler.call(handler, with: ()) { self.operationDone() }
    case .succeeded(let result, let handler):
      PipelineHandler.call(handler, with: result) { self.operationDone() }
    case .failed(let error, let handler):
      if handler == nil, !withState({ $0.outcomeAwaited }) {
        reportUnhandledFailure(error)
      }
      PipelineHandler.call(handler, with: error) { self.operationDone(error: error) }
    }
  }
}

extension Pipeline: SelfSubmitting {
  func submitSelfOnce() {
    if withState({ $0.submitForRun() }), claimQueue() {
      JobController.sharedJobQueue.addOperation(self)
    }
  }
}
