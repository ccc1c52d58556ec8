import CoreMetrics
import Foundation
@_spi(JobScope) import JobKit
import Logging
import PostgresNIO
import ServiceLifecycle

/// A worker process's side of a ``RemoteQueue``: claims the queue's rows and runs the handlers
/// registered for their kinds, as a service-lifecycle `Service`.
///
/// ```swift
/// let worker = RemoteWorker(queue: queue, id: "hasher-1", configuration: .init(), logger: logger)
/// worker.register(HashFile.self, maxConcurrent: 4) { path, context in
///     try await hash(path)          // context.attempt: 1, then 2, … after a failure or a crash
/// }
/// let group = ServiceGroup(services: [client, worker], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// - **Claim**: batches of available rows (`FOR UPDATE SKIP LOCKED`), as many as free handler
///   slots (``Configuration/maxConcurrent``); the attempt is counted and a lease taken, its expiry
///   computed by the database's clock. While a backlog lasts a claim waits for half a batch of
///   free slots, so that claims stay batches. Claims go on while finished rows are being stored.
///   Woken by `NOTIFY` when rows are added, with ``Configuration/pollInterval`` as the fallback.
///   Each claim pass first returns expired leases (any worker's) to the queue, or fails them when
///   no attempt is left. A returned row is a *suspect* (its worker may have died of it): only a
///   worker running no handler claims it, alone, and claims nothing else until it ended, so a
///   handler that kills its process takes no other task with it. A claim that failed for want of
///   an answer is looked for by the heartbeats for one lease: the rows it gave this worker run.
///   Decided by `RemoteWorkerClaimStateMachine`.
/// - **Run**: each handler runs as a JobKit task of a job the worker owns; `maxConcurrent` of
///   ``register(_:maxConcurrent:handler:)`` is that job's per-type limit. Handlers run on threads
///   of the worker's own, so one that computes or blocks does not hold up the heartbeats.
/// - **Heartbeat**: every ``Configuration/heartbeatInterval`` the leases of running rows are
///   extended; a row whose job asked for a cancel has its handler cancelled; a row that is no
///   longer this worker's (its lease expired and was rescued) has its handler cancelled too.
/// - **Complete**: the outcomes of finished handlers are stored together, one statement per
///   batch, fenced row by row: the row's attempt and owner must still be this run's; a stale
///   result is rejected, counted in ``staleCompletions`` and logged. A statement that fails for
///   want of the database (or of an answer within ``RemoteQueue/Configuration/statementTimeout``)
///   is retried with backoff, fenced again, until stored or rejected. A handler's error is stored
///   and the row retried after a jittered exponential delay until the row's `max_attempts`.
/// - **Bad rows**: an unregistered kind or an input that does not decode fails that row (no
///   retry) with a clear stored message; the worker goes on.
/// - **Shutdown** (graceful shutdown): stops claiming, lets running handlers finish for
///   ``Configuration/gracePeriod`` while heartbeats keep their leases and outcomes are stored,
///   then hands the rest back (available again, the attempt not counted; cancelled if their job
///   asked for a cancel meanwhile) and cancels their handlers. It ends at most 2 s after the
///   grace period, answered or not: with the database gone, what was not handed back or stored
///   returns to the queue when its lease expires. Cancelling ``run()`` stops at once: the
///   handlers are cancelled and their rows return to the queue when their leases expire.
/// - **Prune**: every ``Configuration/pruneInterval`` the queue's finished rows past their
///   retention are deleted (``RemoteQueue/prune()``; one worker of the queue at a time).
/// - **Settings** out of range (the queue's ``RemoteQueue/Retention`` included) make ``run()`` throw ``RemoteQueueError/Code/invalidConfiguration``.
///
/// Register every kind before ``run()``; a worker runs once.
public final class RemoteWorker: Service, Sendable {
  /// Leases, heartbeats, batches, retries and shutdown.
  public struct Configuration: Sendable {
    /// How long a claim holds a row without a heartbeat. Another worker takes the row back
    /// after it expired.
    public var leaseDuration: Duration = .seconds(30)
    /// How often leases are extended and cancel requests read. Keep it well under
    /// ``leaseDuration``.
    public var heartbeatInterval: Duration = .seconds(10)
    /// How often an idle worker looks for rows when no notification came.
    public var pollInterval: Duration = .seconds(1)
    /// The most rows one claim takes.
    public var batchSize: Int = 16
    /// The most handlers running at once on this worker, all kinds together.
    public var maxConcurrent: Int = 16
    /// How long a graceful shutdown waits for running handlers before handing them back. The
    /// hand-back and the storing of the last results get at most 2 s more, whether the database
    /// answers or not (rows left claimed come back when their leases expire).
    public var gracePeriod: Duration = .seconds(30)
    /// The waits before a failed task's next attempt: `initialDelay` before the second, each
    /// next wait `multiplier` times longer, at most `maxDelay`, moved at random by up to ±50%
    /// with `jitter`. Its `retryIf` decides whether a handler's error is retried (otherwise the
    /// row fails at once). Its `maxAttempts` is not used: each row carries the
    /// ``RemoteQueue/Configuration/retryPolicy`` it was added with. By default 1 s, doubling, at
    /// most 300 s.
    public var retryPolicy = RetryPolicy(
      maxAttempts: 5, initialDelay: .seconds(1), multiplier: 2, maxDelay: .seconds(300))

    /// The wait before a failed task's second attempt (``retryPolicy``'s `initialDelay`).
    @available(*, deprecated, renamed: "retryPolicy.initialDelay")
    public var retryInitialDelay: Duration {
      get { retryPolicy.initialDelay }
      set { retryPolicy = retryPolicy.with(initialDelay: newValue) }
    }
    /// How much each retry wait grows (``retryPolicy``'s `multiplier`).
    @available(*, deprecated, renamed: "retryPolicy.multiplier")
    public var retryMultiplier: Double {
      get { retryPolicy.multiplier }
      set { retryPolicy = retryPolicy.with(multiplier: newValue) }
    }
    /// The longest retry wait (``retryPolicy``'s `maxDelay`).
    @available(*, deprecated, renamed: "retryPolicy.maxDelay")
    public var retryMaxDelay: Duration {
      get { retryPolicy.maxDelay }
      set { retryPolicy = retryPolicy.with(maxDelay: newValue) }
    }
    /// How often the worker prunes its queue's finished rows (``RemoteQueue/prune()``, as the
    /// queue's ``RemoteQueue/Configuration/retention`` says): once when it starts, then at
    /// this interval. Every worker of a queue may prune; one at a time does (the others' passes
    /// end at once). 60 s by default.
    public var pruneInterval: Duration = .seconds(60)
    /// Where the worker's metrics go (`RemoteMetrics.swift`: claim wait, run time, retries,
    /// failures, stale completions, rows pruned); `nil`: the bootstrapped `MetricsSystem.factory`.
    public var metricsFactory: (any MetricsFactory)? = nil

    /// The defaults: 30 s leases, 10 s heartbeats, batches of 16, 16 handlers, 30 s of grace,
    /// retries after 1 s doubling to at most 300 s, a prune every minute.
    public init() {}

    /// Throws ``RemoteQueueError/Code/invalidConfiguration`` naming each value out of range.
    func validate() throws {
      var problems: [String] = []
      if batchSize < 1 { problems.append("batchSize \(batchSize) is below 1") }
      if maxConcurrent < 1 { problems.append("maxConcurrent \(maxConcurrent) is below 1") }
      if leaseDuration <= .zero { problems.append("leaseDuration \(leaseDuration) is not positive") }
      if heartbeatInterval <= .zero { problems.append("heartbeatInterval \(heartbeatInterval) is not positive") }
      if pollInterval <= .zero { problems.append("pollInterval \(pollInterval) is not positive") }
      if gracePeriod < .zero { problems.append("gracePeriod \(gracePeriod) is negative") }
      if pruneInterval <= .zero { problems.append("pruneInterval \(pruneInterval) is not positive") }
      guard problems.isEmpty else {
        throw RemoteQueueError(
          .invalidConfiguration, message: "RemoteWorker.Configuration: " + problems.joined(separator: "; "))
      }
    }
  }

  /// The queue the worker serves.
  public let queue: RemoteQueue
  /// The worker's name, in logs and in the `owner` of the rows it claims (with a suffix per run).
  public let id: String
  /// The configuration given at creation.
  public let configuration: Configuration
  let logger: Logger
  let job = WorkerJob()
  let state: Locked<WorkerState>
  /// The handlers' threads, off the cooperative pool that heartbeats and claims need.
  let handlerThreads: HandlerThreads
  /// Wakes the claim loop: new rows, free slots.
  let wake = WakeSignal()
  /// Wakes the shutdown's wait for running rows.
  let drained = WakeSignal()
  /// Wakes the completer: outcomes to store.
  let completions = WakeSignal()
  /// Signalled when a graceful shutdown begins.
  let shutdownBegan = WakeSignal()
  let metrics: RemoteMetrics

  /// The loops of ``run()`` that outlive the claiming.
  enum Loop: Sendable {
    case heartbeat
    case completer
    /// The shutdown's end passed (``RemoteWorkerClaimStateMachine/shutdownEnd``).
    case shutdownEnd
  }

  /// A worker named `id` on `queue`, with the default ``Configuration``; its logs go to a
  /// logger labelled "JobKitPostgres.RemoteWorker".
  @available(*, deprecated, message: "pass the logger: init(queue:id:configuration:logger:)")
  public convenience init(queue: RemoteQueue, id: String) {
    self.init(
      queue: queue, id: id, configuration: Configuration(), logger: Logger(label: "JobKitPostgres.RemoteWorker"))
  }

  /// A worker named `id` on `queue`; its logs go to a logger labelled "JobKitPostgres.RemoteWorker".
  @available(*, deprecated, message: "pass the logger: init(queue:id:configuration:logger:)")
  public convenience init(queue: RemoteQueue, id: String, configuration: Configuration) {
    self.init(
      queue: queue, id: id, configuration: configuration, logger: Logger(label: "JobKitPostgres.RemoteWorker"))
  }

  /// A worker named `id` on `queue`. `logger` receives claims' errors, stale completions,
  /// reconnects and shutdown (never a password).
  public init(queue: RemoteQueue, id: String, configuration: Configuration, logger: Logger) {
    self.queue = queue
    self.id = id
    self.configuration = configuration
    self.logger = logger
    self.state = Locked(
      WorkerState(
        claims: RemoteWorkerClaimStateMachine(
          batchSize: configuration.batchSize, maxConcurrent: configuration.maxConcurrent)))
    self.handlerThreads = HandlerThreads(maxThreads: configuration.maxConcurrent, name: "RemoteWorker \(id)")
    self.metrics = RemoteMetrics(queue: queue.name, factory: configuration.metricsFactory ?? MetricsSystem.factory)
  }

  /// Results this worker's handlers produced after their row stopped being theirs (the lease
  /// expired and another worker took the row): rejected by the fence, never stored.
  public var staleCompletions: Int {
    state.withLock { $0.statistics.stale }
  }

  /// What the worker did so far.
  public var statistics: RemoteWorkerStatistics {
    state.withLock { $0.statistics }
  }

  /// Runs `handler` for the rows of kind `K`, at most `maxConcurrent` at once on this worker
  /// (no limit but ``Configuration/maxConcurrent`` when `nil`). Register before ``run()``; a
  /// second registration of a kind replaces the first.
  ///
  /// The handler runs in a Swift `Task`, once per attempt: make it idempotent (the context's
  /// attempt and key tell a re-run). A thrown error is stored as the row's message and retried
  /// (unless ``Configuration/retryPolicy``'s `retryIf` says no);
  /// `CancellationError` after a cancel request cancels the row.
  ///
  /// The handler may compute or block its thread for as long as it needs: it runs on threads
  /// of the worker's own (a `TaskExecutor` preference; on Apple platforms from macOS 15, iOS 18),
  /// not on the cooperative pool the worker's heartbeats need, so its lease is kept meanwhile.
  public func register<K: RemoteTaskKind>(
    _ kind: K.Type,
    maxConcurrent: Int? = nil,
    handler: @escaping @Sendable (K.Input, RemoteTaskContext) async throws -> K.Output
  ) {
    let runner = KindRunner<K>(
      handler: handler, threads: handlerThreads, retryIf: configuration.retryPolicy.retryIf)
    // The limit is set when the kind's first row comes: a limit of a kind that never ran is
    // not a misuse of the worker's job.
    let job = job
    let limit = maxConcurrent.map { max(1, $0) }
    let registration = Registration(
      makeTask: { input, context, scope in runner.makeTask(input, context, scope) },
      setLimit: { if let limit { job.setMaxConcurrentTasks(limit, forGroup: RemoteHandlerTask<K>.self) } })
    state.withLock { $0.registrations[K.name] = registration }
  }

  /// Claims and runs rows until a graceful shutdown (running handlers finish within the grace
  /// period, their leases kept and results stored, then the rest is handed back) or the cancel
  /// of the calling task (stops at once, hands nothing back). Every loop is a child task of
  /// this call. Throws if called twice.
  public func run() async throws {
    let owner = "\(id)/\(UUID().uuidString.prefix(8))"
    let first = state.withLock { state -> Bool in
      guard state.owner == nil else { return false }
      state.owner = owner
      return true
    }
    guard first else { throw RemoteQueueError(.workerAlreadyRan, message: "RemoteWorker \(id) runs once") }
    try configuration.validate()
    try queue.configuration.retention.validate()
    job.startJob()
    await withTaskGroup(of: Loop.self) { loops in
      // The heartbeats and the completer run through the shutdown: they keep the leases and
      // store the outcomes while running handlers finish within the grace period.
      loops.addTask {
        await self.heartbeatLoop(owner: owner)
        return .heartbeat
      }
      loops.addTask {
        await self.completeLoop(owner: owner)
        return .completer
      }
      await withTaskGroup(of: Void.self) { claiming in
        claiming.addTask { await self.listenForWork() }
        claiming.addTask { await self.pruneLoop() }
        await withGracefulShutdownHandler {
          await claimUntilGraceEnds(owner: owner)
        } onGracefulShutdown: {
          let now = ContinuousClock().now
          let grace = self.configuration.gracePeriod
          self.state.withLock { state in
            state.stopping = true
            state.claims.stop(now: now, grace: grace)
          }
          self.wake.signal()
          self.shutdownBegan.signal()
        }
        state.withLock { $0.stopping = true }
        claiming.cancelAll()
      }
      await shutDown(owner: owner)
      state.withLock { $0.completerStopping = true }
      completions.signal()
      // An outcome still being stored then (the database gone) is left to lease expiry.
      if let end = state.withLock({ $0.claims.shutdownEnd }) {
        loops.addTask {
          try? await Task.sleep(until: end, clock: .continuous)
          return .shutdownEnd
        }
      }
      while let ended = await loops.next(), ended != .completer, ended != .shutdownEnd {}
      loops.cancelAll()
    }
    job.release()
    handlerThreads.stop()
    logger.info("worker stopped", metadata: ["worker": "\(id)"])
  }
}

/// Counts of what a ``RemoteWorker`` did.
public struct RemoteWorkerStatistics: Sendable, Equatable {
  /// Rows claimed (each attempt counts).
  public var claimed = 0
  /// Rows completed with the handler's output.
  public var completed = 0
  /// Handler failures stored (retried or final).
  public var failed = 0
  /// Rows cancelled at their job's request.
  public var cancelled = 0
  /// Results rejected by the fence: the row was no longer this worker's.
  public var stale = 0
  /// Rows handed back at shutdown.
  public var handedBack = 0
  /// Expired leases (any worker's) this worker returned to the queue or failed.
  public var rescued = 0
}

/// A handler run: one group per kind, so a kind's `maxConcurrent` is a JobKit per-type limit.
final class RemoteHandlerTask<K: RemoteTaskKind>: Work<HandlerOutcome>, @unchecked Sendable {}

/// What a handler run came to.
enum HandlerOutcome: Sendable {
  case success(Data)
  case failure(code: RemoteTaskError.Code, message: String, retryable: Bool)
  case cancelled
}

/// Runs one kind's handler: decodes the input, calls the handler, encodes the output.
struct KindRunner<K: RemoteTaskKind>: Sendable {
  let handler: @Sendable (K.Input, RemoteTaskContext) async throws -> K.Output
  let threads: HandlerThreads
  /// Whether a handler's error is retried (``RemoteWorker/Configuration/retryPolicy``).
  let retryIf: @Sendable (any Error) -> Bool
  let name = K.name
  let inputName = "\(K.Input.self)"
  /// Shared by the kind's runs (both are `Sendable`; each call keeps its own state).
  let decoder = JSONDecoder()
  let encoder = JSONEncoder()

  func makeTask(_ input: Data, _ context: RemoteTaskContext, _ scope: DurableScope) -> Work<HandlerOutcome> {
    RemoteHandlerTask<K>(async: {
      // The jobs the handler makes, and the tasks they track, are the row's children.
      await JobController.withScope(scope) { await run(input, context) }
    })
  }

  func run(_ input: Data, _ context: RemoteTaskContext) async -> HandlerOutcome {
    let decoded: K.Input
    do {
      decoded = try decoder.decode(K.Input.self, from: input)
    } catch {
      return .failure(
        code: .inputUndecodable,
        message: "the input does not decode as \(inputName) for kind '\(name)': \(error)", retryable: false)
    }
    do {
      return .success(try encoder.encode(try await runHandler(decoded, context)))
    } catch is CancellationError {
      return .cancelled
    } catch {
      return .failure(code: .handlerFailed, message: String(describing: error), retryable: retryIf(error))
    }
  }

  /// The handler, on the worker's handler threads where the platform has task executors.
  private func runHandler(_ input: K.Input, _ context: RemoteTaskContext) async throws -> K.Output {
    if #available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *) {
      return try await withTaskExecutorPreference(threads) { try await handler(input, context) }
    }
    return try await handler(input, context)
  }
}

/// Makes the handler task of a kind for a claimed row.
struct Registration: Sendable {
  let makeTask: @Sendable (Data, RemoteTaskContext, DurableScope) -> Work<HandlerOutcome>
  /// Sets the kind's limit on the worker's job (before its first task).
  let setLimit: @Sendable () -> Void
}

/// The worker's job: a ``KeepAliveTask`` keeps it open while the worker runs, so the handlers
/// it tracks from the claim loop share its per-kind limits.
final class WorkerJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `keepAlive` is itself Sendable and never replaced.
  private let keepAlive = KeepAliveTask()

  override func main() {
    trackAndQueue(keepAlive)
  }

  /// Lets the job finish once its handler tasks did.
  func release() {
    keepAlive.release()
  }
}

/// The worker's state: registrations, running rows, counts. Only state under its lock.
struct WorkerState {
  struct Running {
    let attempt: Int
    let task: Operation
    /// Handed back at shutdown: its late outcome is dropped without a statement.
    var handedBack = false
    /// The handler returned; its outcome is being stored.
    var finishing = false
    /// The row's durable scope, the parent of the tasks its handler makes.
    var scope: DurableScope? = nil
    /// The handler waits for its children: it holds no slot (see `RemoteWorker+Durable.swift`).
    var waiting = false
  }

  var registrations: [String: Registration] = [:]
  /// The kinds whose limit was set on the worker's job.
  var limitsSet: Set<String> = []
  /// The claim loop's decisions.
  var claims: RemoteWorkerClaimStateMachine
  /// Rows of a lost claim that a heartbeat found, for the claim loop to run.
  var adopted: [RemoteWorker.ClaimedRow] = []
  /// The rows this run holds: handlers running, and outcomes not stored yet.
  var running: [Int64: Running] = [:]
  /// Handlers running (rows in `running` that are not finishing nor waiting): the slots in use.
  var handlersRunning = 0
  /// Handlers waiting for their children: rows held that hold no slot.
  var handlersWaiting = 0
  /// Outcomes waiting for the completer, in the order the handlers ended.
  var outcomes: [(row: RemoteWorker.ClaimedRow, outcome: HandlerOutcome)] = []
  var owner: String?
  var stopping = false
  /// Set once the shutdown handed back what it could: the completer stores what is left and ends.
  var completerStopping = false
  /// After it, a shutdown's completer stops retrying results it cannot store.
  var storeDeadline: ContinuousClock.Instant?
  var statistics = RemoteWorkerStatistics()
  /// Claim statements answered (rows or none): tests see that the claim loop looked.
  var claimStatements = 0
}
