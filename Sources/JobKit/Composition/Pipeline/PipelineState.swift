/// What a pipeline's steps consult between two steps.
protocol PipelineCheckpoint: AnyObject, Sendable {
  /// Throws `CancellationError` when the pipeline was cancelled, so that the next step does not
  /// run; returns `true` when it is suspended: the caller then awaits `waitUntilResumed()`
  /// before the step (a plain call on the usual path, an `await` only when suspended). Called
  /// before every step, in the pipeline's Swift task.
  func checkpoint() throws -> Bool

  /// Waits until the pipeline is resumed, then checks again as `checkpoint()` does; throws
  /// `CancellationError` if it was cancelled meanwhile.
  func waitUntilResumed() async throws
}

/// The state of one ``Pipeline``, changed only by the pure transitions below, under the
/// pipeline's lock. Each returns what the caller must do once the lock is released; none calls
/// user code, and none releases one of the user's closures: a transition that drops steps or a
/// handler returns it (``Dropped``), for the caller to release after the lock.
///
/// A pipeline is built (`notStarted`), then started once by its queue (`running`), then `ended`.
/// Its steps are one composed closure: `then` moves it out of a not-started pipeline into a new
/// one, so the old object keeps no steps (it is a spent builder).
struct PipelineState<Output: Sendable> {
  /// All steps of the pipeline, composed: runs them in order, calling the checkpoint before each,
  /// and returns the last step's result.
  typealias Steps = @Sendable (_ checkpoint: any PipelineCheckpoint) async throws -> Output

  /// What a not-started pipeline will do when started.
  enum Plan {
    /// Run these steps.
    case steps(Steps)
    /// Run nothing and fail with this error (a pipeline born from misuse).
    case unusable(JobKitError)
    /// A spent builder, or a pipeline built on one: run nothing and fail with
    /// ``JobKitError/Code/spentBuilder``. `then` was called on a `Pipeline<builderOutput>`; the
    /// error, whose message names that type, is made only if such a pipeline starts (formatting
    /// it on every `then` cost a quarter of building a step).
    case spent(builderOutput: Any.Type)
  }

  enum Phase {
    /// Not started yet. `submitted`: `finally` or `run()` handed it to the shared queue, so it
    /// counts as started for `then`, `onError` and `finally`.
    case notStarted(Plan, submitted: Bool)
    /// Started: its Swift task runs the steps. `runner` is `nil` until the task was created;
    /// `cancelled` once `operationCancelled()` was called (``ConcurrentOperation`` calls it once, after
    /// `operationStart()` returned, so the runner exists by then) and the runner cancelled.
    case running(runner: Task<Void, Never>?, cancelled: Bool)
    /// Done: `result` is the last step's result if every step succeeded, `nil` after a failure or
    /// a cancel.
    case ended(result: Output?)
  }

  private(set) var phase: Phase
  var errorHandler: PipelineHandler<any Error>?
  var finallyHandler: PipelineHandler<Output>?
  /// `onCancelled`'s handler: called once if the pipeline ends cancelled.
  var cancelHandler: PipelineHandler<Void>?
  /// `run()` or `runAndWait()` was called: a failure will be thrown to its caller, so it is
  /// handled (see `Pipeline.reportUnhandledFailure`).
  private(set) var outcomeAwaited = false

  /// What a transition took out of the state: the user's closures (steps, handlers), handed to
  /// the caller so that their last reference is released after the lock (a captured value's
  /// `deinit` may call back into the pipeline).
  struct Dropped {
    var plan: Plan?
    var finallyHandler: PipelineHandler<Output>?
    var errorHandler: PipelineHandler<any Error>?
    var cancelHandler: PipelineHandler<Void>?
  }

  init(plan: Plan, errorHandler: PipelineHandler<any Error>?, cancelHandler: PipelineHandler<Void>? = nil) {
    phase = .notStarted(plan, submitted: false)
    self.errorHandler = errorHandler
    self.cancelHandler = cancelHandler
  }

  private var handlers: PipelineHandlers { PipelineHandlers(error: errorHandler, cancel: cancelHandler) }

  // MARK: Building

  /// `then` was called: hands the plan and the error handler to the new pipeline. A buildable
  /// pipeline becomes a spent builder (it keeps its error handler); a spent builder or a pipeline
  /// born from misuse hands on its error; a started pipeline hands on `modifiedAfterStart`.
  mutating func handOver() -> (plan: Plan, handlers: PipelineHandlers) {
    switch phase {
    case .notStarted(.steps(let steps), submitted: false):
      phase = .notStarted(.spent(builderOutput: Output.self), submitted: false)
      return (.steps(steps), handlers)
    case .notStarted(.unusable(let error), submitted: false):
      return (.unusable(error), handlers)
    case .notStarted(.spent(let builderOutput), submitted: false):
      return (.spent(builderOutput: builderOutput), handlers)
    case .notStarted(_, submitted: true), .running, .ended:
      return (.unusable(Self.modifiedAfterStart("then")), handlers)
    }
  }

  /// `then` was called with a step that keeps the output type. Returns `true` if the step was
  /// appended in place (the pipeline is buildable); `false` if the caller must hand over instead
  /// (a spent builder, a pipeline born from misuse, or a started one). Composes closures only.
  mutating func append(_ body: @escaping @Sendable (Output) async throws -> Output) -> Bool {
    guard case .notStarted(.steps(let previous), submitted: false) = phase else { return false }
    phase = .notStarted(
      .steps { checkpoint in
        let input = try await previous(checkpoint)
        if try checkpoint.checkpoint() { try await checkpoint.waitUntilResumed() }
        return try await body(input)
      }, submitted: false)
    return true
  }

  /// `onError` or `onCancelled` was called: sets the handler in `slot`. Returns `isSet` `true`
  /// if the handler was set, with the handler it `replaced` (to release after the lock), or
  /// `false` if the pipeline already started and the caller must return a failing pipeline.
  mutating func setHandler<Argument>(
    _ slot: WritableKeyPath<Self, PipelineHandler<Argument>?>, to handler: PipelineHandler<Argument>
  ) -> (isSet: Bool, replaced: PipelineHandler<Argument>?) {
    guard case .notStarted(_, submitted: false) = phase else { return (false, nil) }
    let replaced = self[keyPath: slot]
    self[keyPath: slot] = handler
    return (true, replaced)
  }

  // MARK: Submitting

  /// `finally` was called. Returns `true` if the handler was set and the caller must add the
  /// pipeline to the shared queue; `false` if it already started (a misuse to report).
  mutating func submit(finally handler: PipelineHandler<Output>) -> Bool {
    guard case .notStarted(let plan, submitted: false) = phase else { return false }
    finallyHandler = handler
    phase = .notStarted(plan, submitted: true)
    return true
  }

  /// `run()` was called. Returns `true` if the caller must add the pipeline to the shared queue;
  /// `false` if it was already submitted or started (then `run()` just awaits it).
  mutating func submitForRun() -> Bool {
    outcomeAwaited = true
    guard case .notStarted(let plan, submitted: false) = phase else { return false }
    phase = .notStarted(plan, submitted: true)
    return true
  }

  // MARK: Running

  /// The queue started the pipeline. Returns the steps to run (for an unusable plan, steps that
  /// throw its error), or `nil` if it was not in the not-started phase (which its operation
  /// bookkeeping rules out).
  mutating func start() -> Steps? {
    guard case .notStarted(let plan, _) = phase else { return nil }
    phase = .running(runner: nil, cancelled: false)
    switch plan {
    case .steps(let steps):
      return steps
    case .unusable(let error):
      return { _ in throw error }
    case .spent(let builderOutput):
      let error = Self.spent(builderOutput)
      return { _ in throw error }
    }
  }

  /// The Swift task running the steps was created (in `operationStart()`, so before any cancel
  /// reaches `operationCancelled()`). Ignored if the steps already ended.
  mutating func runnerCreated(_ runner: Task<Void, Never>) {
    guard case .running(runner: nil, let cancelled) = phase else { return }
    phase = .running(runner: runner, cancelled: cancelled)
  }

  /// `operationCancelled()` was called. Returns the task to cancel, if the steps
  /// still run.
  mutating func cancel() -> Task<Void, Never>? {
    guard case .running(let runner, cancelled: false) = phase else { return nil }
    phase = .running(runner: runner, cancelled: true)
    return runner
  }

  enum EndAction {
    /// Cancelled: call the cancellation handler (if any), finish without an error.
    case cancelled(PipelineHandler<Void>?)
    /// Call `finally`'s handler (if any) with the result, then finish.
    case succeeded(Output, PipelineHandler<Output>?)
    /// Call the error handler (if any) with the error, then finish with it.
    case failed(any Error, PipelineHandler<any Error>?)
  }

  /// The steps returned or threw; `cancelled`: whether the operation had recorded a cancel,
  /// read after they did. Decides the outcome once: a cancel that came first (read there, or called before
  /// this) wins, and a later cancel changes nothing. Takes both handlers out: the action carries
  /// the one to call, and both are returned as dropped, to release after the lock.
  mutating func stepsEnded(_ outcome: Result<Output, any Error>, cancelled: Bool) -> (EndAction, Dropped) {
    let dropped = takePipelineHandlers()
    var wasCancelled = cancelled
    if case .running(_, cancelled: true) = phase {
      wasCancelled = true
    }
    switch (wasCancelled, outcome) {
    case (true, _):
      phase = .ended(result: nil)
      return (.cancelled(dropped.cancelHandler), dropped)
    case (false, .success(let result)):
      phase = .ended(result: result)
      return (.succeeded(result, dropped.finallyHandler), dropped)
    case (false, .failure(let error)):
      phase = .ended(result: nil)
      return (.failed(error, dropped.errorHandler), dropped)
    }
  }

  /// The pipeline was cancelled before its queue started it: it ends without running anything.
  /// Returns its steps and handlers, to release after the lock.
  mutating func endBeforeStart() -> Dropped {
    var dropped = takePipelineHandlers()
    if case .notStarted(let plan, _) = phase {
      dropped.plan = plan
    }
    phase = .ended(result: nil)
    return dropped
  }

  /// Takes every handler out, to release after the lock (and call the one the end calls for).
  private mutating func takePipelineHandlers() -> Dropped {
    let dropped = Dropped(finallyHandler: finallyHandler, errorHandler: errorHandler, cancelHandler: cancelHandler)
    finallyHandler = nil
    errorHandler = nil
    cancelHandler = nil
    return dropped
  }

  /// The last step's result, once the pipeline succeeded.
  var result: Output? {
    if case .ended(let result) = phase { return result }
    return nil
  }

  // MARK: Misuse errors

  private static func spent(_ builderOutput: Any.Type) -> JobKitError {
    JobKitError(
      .spentBuilder,
      message: "then was already called on this Pipeline<\(builderOutput)>, which moved its steps to the pipeline "
        + "then returned; this one runs no step"
    )
  }

  private static func modifiedAfterStart(_ call: String) -> JobKitError {
    JobKitError(
      .modifiedAfterStart,
      message: "\(call) was called on a Pipeline<\(Output.self)> that had already started; the started pipeline "
        + "was not changed and the pipeline \(call) returned runs no step"
    )
  }

  /// The error of the pipeline `onError` returns when called on a started pipeline.
  static var errorHandlerAfterStart: JobKitError { modifiedAfterStart("onError") }

  /// The error of the pipeline `onCancelled` returns when called on a started pipeline.
  static var cancelHandlerAfterStart: JobKitError { modifiedAfterStart("onCancelled") }
}
