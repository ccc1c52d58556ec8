import Foundation

/// A queue that runs commands as soon as they are added, one after another or all at once, and
/// says each time it has drained: MGCommand's `autoStartGroup`.
///
/// ```swift
/// let commands = CommandQueue(mode: .sequential)
/// commands.onDrained = { failures in print("idle; \(failures.count) failed") }
/// commands.add(BlockTask { print("first") })   // starts at once
/// commands.add(BlockTask { print("second") })  // runs after "first"
/// ```
///
/// Commands added to an idle queue start a *burst*, a group that runs them; commands added while
/// it runs join it. ``onDrained`` is called each time the queue ran dry, with the failures since
/// the last call, and ``drained()`` awaits that. ``pause()`` holds back new starts until
/// ``resume()``; ``cancelAll()`` cancels every command added so far. No added command is lost.
/// Every member is safe to call from any thread. The rules in full: <doc:GroupRules>.
public final class CommandQueue: Sendable, OperationFinishObserver {
  /// How a burst runs its commands.
  public enum Mode: Sendable {
    /// One after another, in the order added.
    case sequential
    /// All at once.
    case concurrent
  }

  /// How the queue runs its commands.
  public let mode: Mode
  /// The context shared with every command and nested group (see ``JobContext``).
  public let context: JobContext
  private let state: LockedBox<CommandQueueState>

  /// Creates an idle, running (not paused) queue. `context` is shared with every command.
  public init(mode: Mode, context: JobContext = JobContext()) {
    self.mode = mode
    self.context = context
    state = LockedBox(CommandQueueState(isSequential: mode == .sequential))
  }

  /// Adds `command` and starts it as the ``mode`` says (see the type's documentation): at once
  /// when the queue is idle, or in concurrent mode, or after the commands added before it in
  /// sequential mode; when resumed if paused. Returns without waiting for it.
  ///
  /// Adding a command that is already in the queue's running burst is reported as
  /// ``JobKitError/Code/taskAlreadyTracked`` and ignored. Do not add a command that is in an
  /// `OperationQueue` already.
  public func add(_ command: Operation) {
    while true {
      let (group, isNew) = claimBurst()
      let accepted = group.addTask(command, reportingRejection: false)
      let start = state.withLock { $0.addReturned(to: group, accepted: accepted, installed: isNew) }
      start?.startJob()
      if accepted {
        return
      }
    }
  }

  /// Whether the queue is paused.
  public var isPaused: Bool { state.withLock { $0.isPaused } }

  /// The same as ``isPaused`` (CompositeOperations' `isSuspended`).
  public var isSuspended: Bool { isPaused }

  /// The same as ``pause()`` (CompositeOperations' `suspend`): ``resume()`` ends it.
  public func suspend() {
    pause()
  }

  /// Stops starting commands: running ones go on, the others wait until ``resume()``.
  public func pause() {
    setPaused(true)
  }

  /// Starts the commands that waited because of ``pause()``, and new ones as they come.
  public func resume() {
    setPaused(false)
  }

  /// Called each time the queue drained, and before a ``drained()`` call returns beside newer
  /// commands with failures unreported (see the type's documentation), with the failures since
  /// the last call. Runs on the thread that finished a burst (the last one, or the last one such
  /// a ``drained()`` call waited for: a queue worker or dispatch thread), with no JobKit lock
  /// held, after that burst's job finished; two calls can
  /// overlap only if commands are added from other threads, or after ``cancelAll()``, meanwhile.
  /// Set it before adding commands; setting it is thread-safe.
  public var onDrained: (@Sendable (_ failures: [TaskFailure]) -> Void)? {
    get { state.withLock { $0.onDrained } }
    set {
      let replaced = state.withLock { exchange(&$0.onDrained, with: newValue) }
      _ = replaced  // released after the lock: the user's earlier handler
    }
  }

  /// Suspends until every command added so far has finished and ``onDrained`` has reported
  /// their failures (see the type's documentation); returns at once when the queue is idle and
  /// no ``onDrained`` call is on its way. Commands added meanwhile are not waited for, but a
  /// command that joins a running burst keeps that burst (and so this call) going until it
  /// finished too. "Added" means its ``add(_:)`` returned: one whose `add` runs on another thread
  /// as this is called may be waited for or not.
  ///
  /// Since this call waits for ``onDrained`` calls on their way, do not make the handler wait
  /// for it (block in the handler until a `drained()` call returned): that never ends.
  ///
  /// A paused queue does not drain: commands waiting for ``resume()`` are waited for. Cancelling
  /// the awaiting Swift task returns at once, without cancelling any command.
  public func drained() async {
    let id = state.withLock { $0.makeDrainWaiter() }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        if !state.withLock({ $0.awaitDrain(id, continuation) }) {
          continuation.resume()
        }
      }
    } onCancel: {
      state.withLock { $0.cancelDrainWait(id) }?.resume()
    }
  }

  /// Cancels every command added so far (see the type's documentation). ``onDrained`` is still
  /// called once they all finished.
  public func cancelAll() {
    for group in state.withLock({ $0.cancelAll() }) {
      group.cancel()
    }
  }

  // MARK: - Inspecting

  /// The commands the queue holds now, oldest burst first: in each burst, those started and not
  /// finished yet in the order they started, then those waiting (for their turn in sequential
  /// mode, for ``resume()`` while paused), in the order they were added. MGCommand's `commands`.
  ///
  /// A command leaves the list once its burst routed it (it finished), or when ``cancelAll()``
  /// dropped it before it started. An idle queue holds none. A snapshot, read under the queue's
  /// and its bursts' locks without asking any command anything: commands may start, finish or
  /// be added on other threads by the time you read it. Safe from any thread.
  public var commands: [Operation] {
    state.withLock { $0.bursts.map(\.group) }.flatMap(\.tasks)
  }

  /// How many commands the queue holds now (``commands``'s count; the same snapshot rules
  /// apply). MGCommand's `count`.
  public var commandCount: Int {
    commands.count
  }

  /// The commands the queue started (handed to their operation queue) whose finish it has not
  /// seen yet, oldest burst first. MGCommand's `activeCommands`. A snapshot decided from the
  /// queue's own bookkeeping, not from the commands' `isExecuting` (see
  /// ``GroupJob/runningTasks``). Safe from any thread.
  public var runningCommands: [Operation] {
    state.withLock { $0.bursts.map(\.group) }.flatMap(\.runningTasks)
  }

  // MARK: - Bursts

  /// The burst `add` must use, and whether it is new (then `add` starts it after adding).
  private func claimBurst() -> (GroupJob, isNew: Bool) {
    if case .join(let group) = state.withLock({ $0.claim() }) {
      return (group, false)
    }
    let fresh: GroupJob = mode == .sequential ? SequentialGroup() : ConcurrentGroup()
    fresh.propagatesTaskCancellation = false  // commands are independent
    fresh.adoptContext(context)
    switch state.withLock({ $0.install(fresh) }) {
    case .join(let existing):
      return (existing, false)
    case .installed(let held, let generation):
      fresh.setHeld(held, generation: generation)
      _ = fresh.addFinishObserver(self)
      return (fresh, true)
    }
  }

  private func setPaused(_ paused: Bool) {
    let (generation, groups) = state.withLock { $0.setPaused(paused) }
    for group in groups {
      group.setHeld(paused, generation: generation)
    }
  }

  /// A burst finished: start the burst that waited for it (sequential mode), call the drained
  /// handler if the state says so (see ``CommandQueueState/burstFinished(_:failures:)``), and
  /// resume the `drained()` callers that waited for it and for that call.
  func operationDidFinish(_ operation: ConcurrentOperation) {
    guard let group = operation as? GroupJob else { return }
    let failures = group.failures
    let end = state.withLock { $0.burstFinished(group, failures: failures) }
    end.start?.startJob()
    var waiters = end.waiters
    if let report = end.report {
      report.handler(report.failures)
      waiters += state.withLock { $0.reportReturned(report.id) }
    }
    for waiter in waiters {
      waiter.resume()
    }
  }
}
