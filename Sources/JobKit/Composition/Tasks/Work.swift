import Foundation

/// A task made from a closure that returns a typed value: synchronous, `async`, or wrapping a
/// callback-based API. Read the value from ``result`` or ``output`` once it finished, or get it
/// from ``run()`` or ``JobController/trackAndQueue(resultOf:completion:)``.
///
/// ```swift
/// let listing = Work { try FileManager.default.contentsOfDirectory(atPath: path) }
/// let names = try await listing.run()
/// ```
///
/// - A synchronous body runs once, on the thread that starts the task; `cancel()` cannot interrupt it.
/// - An `async` body runs in a new Swift `Task`; `cancel()` cancels that task.
/// - A callback body runs once, on the starting thread, and is handed `complete`: call it exactly
///   once, from any thread. Later calls are reported as ``JobKitError/Code/completedTwice``.
///
/// ``result`` is set before the task finishes and never changes. A body that throws
/// `CancellationError` ends the task cancelled, not failed. Each `Work<Output>` specialisation is
/// its own group in a job. Outcome and groups in full: <doc:TaskRules>.
open class Work<Output: Sendable>: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable; the outcome and runner live in `workState`, only
  // touched under its stripe lock.
  private enum Body {
    case sync(@Sendable () throws -> Output)
    case async(@Sendable () async throws -> Output)
    case callback(@Sendable (_ complete: @escaping @Sendable (Result<Output, any Error>) -> Void) -> Void)
  }

  private let body: Body
  /// Only touched under `SharedLocks.withLock(for: self)`: a box and a mutex of its own would be
  /// one allocation and a mutex's set-up and tear-down more per task, for state that is touched
  /// two or three times. Exclusivity unchecked: the stripe's lock already excludes other accesses.
  @exclusivity(unchecked) private var workState = WorkState()

  /// Reads the outcome state under the task's stripe lock.
  private func readWorkState<Result>(_ body: (WorkState) -> Result) -> Result {
    SharedLocks.withLock(for: self) { body(workState) }
  }

  /// Changes the outcome state under the task's stripe lock, only while no outcome is recorded
  /// (else returns `nil`): once one is, the state is never written again, because the job
  /// routing the finished task reads it with no lock (`outcomeParts`). `body` only touches state.
  private func changeIncompleteWorkState<Result>(_ body: (inout WorkState) -> Result) -> Result? {
    SharedLocks.withLock(for: self) {
      guard !workState.isComplete else { return nil }
      return body(&workState)
    }
  }

  /// Creates a task whose synchronous `body` runs on the thread that starts it.
  public init(_ body: @escaping @Sendable () throws -> Output) {
    self.body = .sync(body)
    super.init()
  }

  /// Creates a task whose `body` runs in a Swift `Task` that `cancel()` cancels.
  public init(async body: @escaping @Sendable () async throws -> Output) {
    self.body = .async(body)
    super.init()
  }

  /// Wraps a callback-based API: call `complete` exactly once (later calls are ignored and
  /// reported). `body` runs on the thread that starts the task; `complete` may be called from
  /// any thread, also before `body` returns.
  public init(
    callback body: @escaping @Sendable (_ complete: @escaping @Sendable (Result<Output, any Error>) -> Void) -> Void
  ) {
    self.body = .callback(body)
    super.init()
  }

  /// The outcome, `nil` until the task finished (see the type's documentation).
  public var result: Result<Output, any Error>? {
    let state = readWorkState { $0 }
    guard state.isComplete else { return nil }
    return Self.outcome(of: state)
  }

  /// Hands `completion` the outcome of finished `work` as a `Result`: its ``result``; should it
  /// have none, its ``ConcurrentOperation/error`` or else `CancellationError`. For routing
  /// (`WorkNode`), after the finish, with no lock held; reads the state once. Inlinable: made
  /// into a closure by the caller's specialization of `trackAndQueue(resultOf:completion:)` (a
  /// `WorkNode`'s `handOutcome`), it builds the `Result` where `Output` is known, without asking the
  /// runtime for the metadata of `Result<Output, any Error>` as JobKit's unspecialized generic
  /// code must.
  @inlinable
  static func handOutcome(of work: Work<Output>, to completion: (Result<Output, any Error>) -> Void) {
    let (isComplete, failure, value) = work.outcomeParts
    if !isComplete {
      completion(.failure(work.error ?? CancellationError()))
    } else if let failure {
      completion(.failure(failure))
    } else {
      // A complete state without a failure holds the body's value, an `Output`, boxed.
      completion(.success(unbox(value!)))
    }
  }

  /// The state's outcome: whether it is complete, its failure, its boxed value. Read without the
  /// task's lock, only by the job routing the finished task: the job's lock orders that read
  /// after the finish, and no field read here is written after the finish (only `runner` is).
  @usableFromInline
  var outcomeParts: (isComplete: Bool, failure: (any Error)?, value: (any Sendable)?) {
    (workState.isComplete, workState.failure, workState.value)
  }

  /// The `Output` that `complete` boxed. The box holds exactly an `Output` unless `Output` is an
  /// existential (the box then holds its dynamic type): opened and its type compared, it is
  /// reinterpreted as is, without the runtime's cast from an existential.
  @inlinable
  static func unbox(_ value: any Sendable) -> Output {
    func open<Boxed>(_ boxed: Boxed) -> Output {
      // Unchecked only when the types were just compared equal: no runtime cast per task.
      Boxed.self == Output.self ? unsafeBitCast(boxed, to: Output.self) : boxed as! Output
    }
    return _openExistential(value, do: open)
  }

  /// The outcome of a complete `state`: its failure, or else its value.
  private static func outcome(of state: WorkState) -> Result<Output, any Error> {
    if let failure = state.failure { return .failure(failure) }
    // A complete state without a failure holds the body's value, boxed by `complete`.
    return .success(unbox(state.value!))
  }

  /// The value of a successful outcome; `nil` before the finish and after a failure or cancel.
  public var output: Output? {
    guard case .success(let value) = result else { return nil }
    return value
  }

  /// Adds the task to ``JobController/sharedJobQueue`` unless JobKit already queued it (a job's
  /// `trackAndQueue`, an earlier `run()` or ``ConcurrentOperation/runAndWait()``) or it already
  /// started, then suspends until it finished and returns its ``output``.
  ///
  /// Throws the body's error, or `CancellationError` if the task was cancelled before it
  /// succeeded. Cancelling the awaiting Swift task cancels the task; `run()` still returns only
  /// once it finished. For a task you added to a queue yourself, await
  /// ``ConcurrentOperation/waitForFinish()`` and read ``result`` instead.
  public func run() async throws -> Output {
    queueOnce()
    do {
      try await waitForFinishCancellingOnTaskCancel()
    } catch {
      // A cancel that arrived after the body succeeded changed nothing.
      if case .success(let value) = result { return value }
      throw error
    }
    return try result?.get() ?? { throw CancellationError() }()
  }

  /// A `Work` of this exact class keeps Foundation's `isReady` and `isCancelled`; a subclass of it
  /// may override them. (Its superclass is then `ConcurrentOperation`; reading it asks the
  /// runtime for no metadata of `Work<Output>`, which unspecialized code would look up.)
  override var inheritsFoundationsAnswers: Bool {
    _getSuperclass(type(of: self)).map(ObjectIdentifier.init) == ObjectIdentifier(ConcurrentOperation.self)
  }

  /// Runs the body (see the type's documentation). Called once, by the queue.
  public final override func operationStart() {
    switch body {
    case .sync(let run):
      let value: Output
      do {
        value = try run()
      } catch {
        complete(value: nil, failure: error)
        return
      }
      complete(value: value, failure: nil)
    case .async(let run):
      let runner = Task.detached {
        let value: Output
        do {
          // As a `BlockTask`'s body: a job it runs is cancelled with this work's reason.
          value = try await ConcurrentOperation.$enclosingOperation.withValue(self) { try await run() }
        } catch {
          self.complete(value: nil, failure: error)
          return
        }
        self.complete(value: value, failure: nil)
      }
      // Not if the body finished already (on the runner's thread).
      changeIncompleteWorkState { $0.runner = runner }
    case .callback(let run):
      run { outcome in self.complete(outcome) }
    }
  }

  /// Cancels the Swift task running an `async` body. Called once, after ``operationStart()``
  /// returned, on the thread that called `cancel()`.
  public final override func operationCancelled() {
    readWorkState { $0.runner }?.cancel()
  }

  override func startCancelled() {
    changeIncompleteWorkState { state in
      state.isComplete = true
      state.failure = CancellationError()
    }
    super.startCancelled()
  }

  /// A failed dependency skips the task: its ``result`` is `.failure(error)` (a
  /// ``JobKitError/Code/dependencyFailed``), and it is cancelled, so its body never runs.
  override func skipForFailedDependency(_ error: JobKitError) {
    changeIncompleteWorkState { state in
      state.isComplete = true
      state.failure = error
    }
    cancel()
  }

  /// Records the first outcome (a callback body's) and finishes the task; reports a later one.
  private func complete(_ outcome: Result<Output, any Error>) {
    switch outcome {
    case .success(let value):
      complete(value: value, failure: nil)
    case .failure(let error):
      complete(value: nil, failure: error)
    }
  }

  /// Records the first outcome, `value` (an `Output`, boxed) or else `failure`, and finishes the
  /// task; reports a later one. Takes the outcome apart rather than as a `Result`, so that
  /// finishing asks the runtime for no metadata of a type made from `Output`.
  private func complete(value: (any Sendable)?, failure: (any Error)?) {
    guard let failure, failure is CancellationError else {
      // A value or a failure: recorded and finished under one lock (the task's mutex guards both).
      // A second outcome only reads the state (see `changeIncompleteWorkState`).
      let recorded = operationDone(error: failure) {
        !workState.isComplete && workState.record(value: value, failure: failure)
      }
      if !recorded {
        reportCompletedTwice()
      }
      return
    }
    guard changeIncompleteWorkState({ $0.record(value: nil, failure: failure) }) == true else {
      reportCompletedTwice()
      return
    }
    // The body said "cancelled": the task is cancelled, as by `cancel()` (no lock is held here).
    if !isCancelRecorded {
      cancel()
    }
    operationDone()
  }

  private func reportCompletedTwice() {
    reportMisuse(.completedTwice, "complete was called again on a \(type(of: self)); ignored, the first result stands")
  }
}

/// A ``Work``'s outcome without its value, outside the generic class so that its type does not
/// depend on `Output`: unspecialized generic code asks the runtime for the
/// metadata of every generic type it touches (a `Result<Output, any Error>`, a type nested in
/// `Work<Output>`), on every task.
private struct WorkState {
  /// Whether the outcome was recorded: the first completion, or a start after a cancel.
  var isComplete = false
  /// The outcome's error; `nil` in a complete state: a success, whose value is `value`.
  var failure: (any Error)?
  /// A success's value (an `Output`), boxed: fits the box's inline buffer unless it is larger
  /// than three words, and asks the runtime for no metadata of a type made from `Output`.
  var value: (any Sendable)?
  /// The Swift task running an `async` body, so a cancel can reach it.
  var runner: Task<Void, Never>?

  /// Records the first outcome: `value` (an `Output`, boxed) or else `failure`; the runner is no
  /// longer needed. Returns `false`, changing nothing, if an outcome was recorded already.
  mutating func record(value: (any Sendable)?, failure: (any Error)?) -> Bool {
    guard !isComplete else { return false }
    isComplete = true
    self.failure = failure
    self.value = value
    runner = nil
    return true
  }
}

/// The node of a ``Work`` tracked with a completion that takes its `Result`: it keeps that
/// completion as given and hands it the finished task's outcome, so that tracking wraps no
/// closure around it (an allocation per task). Made in the caller's specialization, as
/// `TaskNodeWithCompletion` is.
@usableFromInline
final class WorkNode<Output: Sendable>: TaskNode, @unchecked Sendable {
  // @unchecked Sendable: as for `TaskNode`; `completion` and `handOutcome` are immutable and
  // `@Sendable`.
  @usableFromInline
  typealias OutcomeHandoff = @Sendable (Work<Output>, (Result<Output, any Error>) -> Void) -> Void

  let completion: @Sendable (Result<Output, any Error>) -> Void
  /// `Work.handOutcome(of:to:)`, made by the caller's specialization: a closure with no context once `Output`
  /// is known there (a caller generic over `Output` makes it with one, which holds the metadata).
  let handOutcome: OutcomeHandoff
  /// The task, typed, as `operation` holds it: the routed task is always this one.
  unowned(unsafe) let work: Work<Output>

  @usableFromInline
  init(
    job: __shared JobController, work: Work<Output>,
    completion: @escaping @Sendable (Result<Output, any Error>) -> Void, handOutcome: @escaping OutcomeHandoff
  ) {
    self.completion = completion
    self.handOutcome = handOutcome
    self.work = work
    super.init(job: job, task: work)
  }

  override func callCompletion(_ task: Operation) -> Bool {
    handOutcome(work, completion)
    return true
  }
}

extension JobController {
  /// Tracks `work` and adds it to ``taskQueue``; when it finished, `completion` is called with
  /// its ``Work/result`` instead of ``taskFinished(_:)``, serially with the job's other callbacks
  /// (routed like ``trackAndQueue(_:completion:)``).
  ///
  /// The argument label keeps the call unambiguous: `trackAndQueue(work) { task in … }` still
  /// hands the closure the task itself.
  ///
  /// ```swift
  /// trackAndQueue(resultOf: Work { try listDirectory(path) }) { result in
  ///     if case .success(let entries) = result { visit(entries) }
  /// }
  /// ```
  @inlinable
  public func trackAndQueue<Output>(
    resultOf work: Work<Output>,
    completion: @escaping @Sendable (Result<Output, any Error>) -> Void
  ) {
    let node = WorkNode(job: self, work: work, completion: completion) { Work.handOutcome(of: $0, to: $1) }
    track(work, node: node, queue: queueOfTasks)
  }

  /// As ``trackAndQueue(resultOf:completion:)``, unless the group of `work` (its exact type,
  /// `Work<Output>` or a subclass) has as many tasks waiting as
  /// ``setMaxQueuedTasks(_:forGroup:)`` allows: then it returns `false`, as
  /// ``tryTrackAndQueue(_:completion:)`` does, and `completion` is never called.
  @discardableResult @inlinable
  public func tryTrackAndQueue<Output>(
    resultOf work: Work<Output>,
    completion: @escaping @Sendable (Result<Output, any Error>) -> Void
  ) -> Bool {
    let node = WorkNode(job: self, work: work, completion: completion) { Work.handOutcome(of: $0, to: $1) }
    return track(work, node: node, queue: queueOfTasks, bounded: true) != nil
  }

  /// Like ``trackAndQueue(resultOf:completion:)``, but `work` is queued only once every one of
  /// `dependencies` finished and was routed by this job (see
  /// ``JobController/trackAndQueue(_:after:completion:)``). If one of them failed or was
  /// cancelled, `work` never runs: `completion` gets `.failure(JobKitError)` with the code
  /// ``JobKitError/Code/dependencyFailed``, whose description names that dependency.
  ///
  /// ```swift
  /// let compile = Work { try compile(target) }
  /// trackAndQueue(resultOf: compile, after: dependencyBuilds) { result in
  ///     if case .failure(let error as JobKitError) = result, error.code == .dependencyFailed { skipped.append(target) }
  /// }
  /// ```
  public func trackAndQueue<Output>(
    resultOf work: Work<Output>,
    after dependencies: [Operation],
    completion: @escaping @Sendable (Result<Output, any Error>) -> Void
  ) {
    trackAndQueue(work, after: dependencies) { (finished: Work<Output>) in
      Work.handOutcome(of: finished, to: completion)
    }
  }
}

/// The code a ``Work`` reports, declared with it (the core knows nothing of `Work`).
extension JobKitError.Code {
  /// The `complete` handed to a `Work(callback:)` body was called again. The later call is
  /// ignored; the first result stands.
  public static let completedTwice = Self(name: "completedTwice")
}
