import Foundation

/// A task made from a closure, with a synchronous or an asynchronous body. See
/// <doc:MigratingFromMGCommand>.
///
/// ```swift
/// let sequence = SequentialGroup()
/// sequence.add(BlockTask { print("runs on a task queue thread") })
/// sequence.add(BlockTask(async: { try await upload() }))
/// sequence.add(BlockTask { context in context[.step] = "done" })
/// ```
///
/// - A synchronous body runs once, on the thread that starts the task; `cancel()` cannot interrupt it.
/// - An asynchronous body runs in a new Swift `Task`; `cancel()` cancels that Swift task.
/// - A body that throws finishes the task with that ``ConcurrentOperation/error``; a
///   `CancellationError` ends it cancelled instead, not failed.
/// - A task cancelled before it started never runs its body.
///
/// The body reaches the task's ``context`` as its argument, or as ``JobContext/current``.
/// The rules in full: <doc:TaskRules>.
public final class BlockTask: ConcurrentOperation, ContextConsuming, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable; `blockState` is only touched under its stripe lock.
  /// The body as given: a body without the context argument is kept as it is, not wrapped in a
  /// closure that drops the argument (one allocation per task).
  private enum Body {
    case sync(@Sendable () throws -> Void)
    case syncWithContext(@Sendable (JobContext) throws -> Void)
    case async(@Sendable () async throws -> Void)
    case asyncWithContext(@Sendable (JobContext) async throws -> Void)
  }

  private struct State {
    var context: JobContext?
    /// The Swift task running an asynchronous body, so a cancel can reach it.
    var runner: Task<Void, Never>?
  }

  private let body: Body
  /// Only touched under `SharedLocks.withLock(for: self)` (a lock of its own would cost more than
  /// the task), so the runtime's exclusivity check is redundant.
  @exclusivity(unchecked) private var blockState = State()

  private func withState<Result>(_ body: (inout State) -> Result) -> Result {
    SharedLocks.withLock(for: self) { body(&blockState) }
  }

  /// Creates a task whose synchronous `body` runs on the thread that starts it.
  public init(_ body: @escaping @Sendable () throws -> Void) {
    self.body = .sync(body)
    super.init()
  }

  /// Creates a task whose synchronous `body` runs on the thread that starts it and receives the
  /// task's ``context``.
  public init(_ body: @escaping @Sendable (_ context: JobContext) throws -> Void) {
    self.body = .syncWithContext(body)
    super.init()
  }

  /// Creates a task whose asynchronous `body` runs in a Swift `Task` that `cancel()` cancels.
  public init(async body: @escaping @Sendable () async throws -> Void) {
    self.body = .async(body)
    super.init()
  }

  /// Creates a task whose asynchronous `body` runs in a Swift `Task` that `cancel()` cancels, and
  /// receives the task's ``context``.
  public init(async body: @escaping @Sendable (_ context: JobContext) async throws -> Void) {
    self.body = .asyncWithContext(body)
    super.init()
  }

  /// The context the body sees. Set by the group running the task, before it starts; `nil` until
  /// then for a task outside a group, which gets a new, empty context when it starts.
  public var context: JobContext? {
    get { withState { $0.context } }
    set {
      let replaced = withState { exchange(&$0.context, with: newValue) }
      _ = replaced  // released after the lock: its values are the user's
    }
  }

  /// Adds the task to ``JobController/sharedJobQueue`` unless JobKit already queued it (a job's
  /// `trackAndQueue`, an earlier `run()` or ``ConcurrentOperation/runAndWait()``) or it already
  /// started, then suspends until it finished.
  ///
  /// Throws the body's error, or `CancellationError` if the task was cancelled. Cancelling the
  /// awaiting Swift task cancels the task; `run()` still returns only once it finished. For a task
  /// you added to a queue yourself, await ``ConcurrentOperation/waitForFinish()`` instead.
  public func run() async throws {
    queueOnce()
    try await waitForFinishCancellingOnTaskCancel()
  }

  /// A `BlockTask` keeps Foundation's `isReady` and `isCancelled` (final: nobody overrides them).
  override var inheritsFoundationsAnswers: Bool { true }

  /// Runs the body (see the type's documentation). Called once, by the queue.
  public override func operationStart() {
    let context = withState { state in
      if let context = state.context { return context }
      let context = JobContext()
      state.context = context
      return context
    }
    switch body {
    case .sync(let run):
      runSync(context) { _ in try run() }
    case .syncWithContext(let run):
      runSync(context, run)
    case .async(let run):
      runAsync(context) { _ in try await run() }
    case .asyncWithContext(let run):
      runAsync(context, run)
    }
  }

  /// Runs a synchronous body on this thread with `context` bound, then finishes.
  private func runSync(_ context: JobContext, _ run: (JobContext) throws -> Void) {
    do {
      try JobContext.$current.withValue(context) { try run(context) }
      operationDone()
    } catch {
      finish(throwing: error)
    }
  }

  /// Runs an asynchronous body in a new Swift task with `context` bound, then finishes.
  private func runAsync(_ context: JobContext, _ run: @escaping @Sendable (JobContext) async throws -> Void) {
    let runner = Task.detached {
      do {
        // The body runs with this task as its enclosing operation: a job it runs (its `run()`)
        // is cancelled with this task's reason when this task cancels its Swift task.
        try await JobContext.$current.withValue(context) {
          try await ConcurrentOperation.$enclosingOperation.withValue(self) { try await run(context) }
        }
        self.operationDone()
      } catch {
        self.finish(throwing: error)
      }
    }
    withState { $0.runner = runner }
  }

  /// Cancels the Swift task running an asynchronous body. Called once, after ``operationStart()``
  /// returned, on the thread that called `cancel()`.
  public override func operationCancelled() {
    withState { $0.runner }?.cancel()
  }

  /// Finishes with the body's `error`; a `CancellationError` cancels the task first if nothing
  /// did (see the type's documentation). No lock is held here.
  private func finish(throwing error: any Error) {
    guard error is CancellationError else {
      operationDone(error: error)
      return
    }
    if !isCancelRecorded {
      cancel()
    }
    operationDone()
  }
}
