import Foundation

/// A job: an operation that starts child tasks and decides its next step when they finish,
/// instead of declaring a dependency graph up front. Subclass it, override `main()` to track the
/// first tasks, and override the routing callbacks (or pass completion closures) to decide what
/// comes next (an example: <doc:GettingStarted>). The contract, in short (in full: <doc:RoutingAndThreads>):
/// - **Order.** For each finished task: its own completion closure (or ``taskFinished(_:)``),
///   then, if it was the last unfinished task of its exact class, that group's handler (or
///   ``taskGroupFinished(_:)``), then, once nothing is tracked and `main()` returned,
///   ``allTasksFinished()``. Each callback runs exactly once per event.
/// - **Threads.** `main()` and the callbacks run one at a time, never while JobKit holds a lock,
///   on `main()`'s thread or the thread that finished a task; state only they touch needs no lock.
/// - **Finish.** The job finishes right after an ``allTasksFinished()`` that tracked nothing new;
///   only then is `isFinished` `true`, so `completionBlock`, dependents and ``run()`` see every
///   task and callback done.
/// - **Stop.** `cancel()` and ``fail(_:)`` cancel the unfinished tasks, skip every later callback
///   and still wait for the tasks to finish. A task that cancelled itself is routed like any other.
/// - **Misuse** (tracking twice, after the finish, starting twice) has one documented outcome
///   each (``JobKitError/Code``), recorded in ``ConcurrentOperation/misuses``; it never crashes.
///
/// Failure policies, retries, timeouts, limits, progress and events: <doc:PoliciesAndObservation>.
open class JobController: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: all mutable state lives in `jobState`, a lock-protected box.

  /// The queue ``trackAndQueue(_:)`` adds tasks to: the one given to ``init(taskQueue:)``, else
  /// ``defaultTaskQueue`` if one was set when the job was made, else a concurrent queue the job
  /// made for itself.
  ///
  /// Reading it hands the queue out. A queue the job made for itself that nobody has read yet
  /// cannot be suspended, limited or inspected by anyone, so the job hands the
  /// ``ConcurrentOperation``s it queues on it to a worker thread of a concurrent dispatch queue of
  /// the task's `qualityOfService`, which starts them, instead of through `addOperation`: the same
  /// start, without `OperationQueue`'s bookkeeping per task. The job hands the queue out too, for
  /// good, whenever it adds an operation to it: a plain `Operation`, a task that is not ready
  /// (dependencies) when its worker thread would start it, or a cancelled task that a stop starts
  /// without running it and that is not ready. From the moment the queue is handed out, every task
  /// the job queues goes through `addOperation`, and so does a task already handed to a worker
  /// thread, which checks the queue once more before it starts the task (a worker that checked just
  /// before the hand-out still starts its task outside the queue). A task started outside the queue
  /// is not in the queue's `operations` or `operationCount`, `waitUntilAllOperationsAreFinished()`
  /// does not wait for it (await the job instead), `cancelAllOperations()` does not cancel it and a
  /// `maxConcurrentOperationCount` does not count it; inside such a task `OperationQueue.current`
  /// is `nil`. Read this property once before the first task (or pass a queue to
  /// ``init(taskQueue:)``) to have every task go through the queue. See <doc:RoutingAndThreads>,
  /// "The task queue".
  public var taskQueue: OperationQueue {
    ownQueueFlag?.expose()
    return queueOfTasks
  }

  /// ``taskQueue``, read by JobKit itself: it does not hand the queue out.
  @usableFromInline let queueOfTasks: OperationQueue

  /// Whether ``taskQueue`` is still the job's own, seen by nobody: `nil` for a queue the job was
  /// given (or ``defaultTaskQueue``), unless its maker shares its own flag (`shareOwnQueueFlag`).
  /// Written only while the job is made (its `init`, a subclass's), before it is shared.
  private(set) var ownQueueFlag: OwnQueueFlag?

  /// The job's ``JobScope``: written while the job is made, or by the job that tracks it before
  /// queueing it (`handDownScope`), never after it started.
  var inheritedScope: (any JobScope)? = JobController.currentScope

  /// Contended: `main()`'s thread tracks and routes under it while finishing threads record.
  let jobState = LockedBox(JobState(), contended: true)

  /// The queue ``startJob()`` and ``run()`` submit jobs to: a concurrent queue shared by all
  /// jobs. A job holds a worker thread while `main()` runs and while that thread routes what
  /// finished meanwhile; it counts as executing on its queue until it finished, so a serial job
  /// queue runs one job at a time.
  public static let sharedJobQueue: OperationQueue = {
    let queue = OperationQueue()
    queue.name = "JobKit.sharedJobQueue"
    return queue
  }()

  /// Creates a job whose tasks run on ``defaultTaskQueue`` if one is set, else on a concurrent
  /// queue the job owns.
  public override init() {
    (queueOfTasks, ownQueueFlag) = OwnQueueFlag.queue(
      given: JobController.defaultTaskQueue, name: "JobKit.JobController.taskQueue")
    super.init()
    moveStateIntoJob()
  }

  /// Creates a job whose ``trackAndQueue(_:)`` adds tasks to `taskQueue`, for example a serial
  /// queue or one shared by several jobs.
  public init(taskQueue: OperationQueue) {
    self.queueOfTasks = taskQueue
    self.ownQueueFlag = nil
    super.init()
    moveStateIntoJob()
  }

  /// Makes ``taskQueue`` (given to ``init(taskQueue:)``) a queue the job's maker made for itself
  /// and has not handed out while `ownQueueFlag` says so: the job then starts its
  /// `ConcurrentOperation`s itself, as on a queue of its own, and exposes the shared flag when it
  /// hands the queue out. Only from a subclass's `init`, before the job queues anything or is
  /// shared. (A setter, not an init argument: a designated init clients cannot see would take
  /// initializer inheritance away from their subclasses.)
  func shareOwnQueueFlag(_ ownQueueFlag: OwnQueueFlag) {
    self.ownQueueFlag = ownQueueFlag
  }

  deinit {
    // A job freed before it finished (never started) still tracks tasks waiting for its start.
    let abandoned = abandonJobState()
    // After the lock: no observer of a task keeps the freed job (a task the user keeps may be
    // tracked by another job, or finish later). Released after that: a task's `deinit` is user
    // code.
    for (node, task) in abandoned {
      node.detach(from: task)
    }
  }

  // MARK: - Starting

  /// Submits the job to ``sharedJobQueue``.
  ///
  /// A job can be submitted once: a second `startJob` (or one after ``run()`` submitted it) is
  /// reported as ``JobKitError/Code/startedTwice`` and ignored.
  public func startJob() {
    startJob(on: Self.sharedJobQueue)
  }

  /// Submits the job to `queue`. See ``startJob()``.
  public func startJob(on queue: OperationQueue) {
    if claimQueue() {
      queue.addOperation(self)
    } else {
      reportMisuse(.startedTwice, "startJob was called on a job that was already submitted; ignored")
    }
  }

  /// Starts the job on ``sharedJobQueue`` unless ``startJob()``, `run()` or a parent job's
  /// `trackAndQueue` already queued it (or it already started), then suspends until it finished.
  ///
  /// Throws the job's error (see ``fail(_:)``), or, if it was cancelled, its
  /// ``ConcurrentOperation/cancellationReason`` (`CancellationError` after a plain `cancel()`).
  /// Cancelling the awaiting Swift task cancels the job; `run()` still returns only once the job
  /// and all its tasks finished. If you added the job to a queue yourself, await
  /// ``ConcurrentOperation/waitForFinish()`` instead: JobKit cannot see that submission, and
  /// adding an operation to a queue twice is a fatal error in Foundation.
  public func run() async throws {
    queueOnce(to: Self.sharedJobQueue)
    try await waitForFinishCancellingOnTaskCancel()
  }

  /// Adds the job to `queue` unless ``startJob()``, ``run()`` or a parent job's `trackAndQueue`
  /// already queued it or it already started, without reporting
  /// ``JobKitError/Code/startedTwice`` (``run()`` and `runAndWait()` start a job only if nobody
  /// did).
  func queueOnce(to queue: OperationQueue) {
    if claimQueue() {
      queue.addOperation(self)
    }
  }

  // MARK: - Tracking

  /// Tracks `task`, which the caller adds to a queue (or starts) itself.
  ///
  /// Safe from any thread; usually called from `main()` or a callback, which keeps the job alive
  /// until the task is routed. Routing uses ``taskFinished(_:)``. Tracked before the job
  /// started, the task keeps the job alive until it finished (it may run at any time): a job
  /// dropped unstarted is freed once such tasks finished, and with the tasks waiting for its
  /// start (a group's, for example) at once.
  public func track(_ task: Operation) {
    track(task, node: TaskNode(job: self, task: task), queue: nil)
  }

  /// Tracks `task` and adds it to ``taskQueue``.
  public func trackAndQueue(_ task: Operation) {
    track(task, node: TaskNode(job: self, task: task), queue: queueOfTasks)
  }

  /// Tracks `task`, which the caller queues itself; when it finishes, `completion` is called
  /// with it instead of ``taskFinished(_:)``, serially with the job's other callbacks.
  @inlinable
  public func track<T: Operation>(_ task: T, completion: @escaping @Sendable (T) -> Void) {
    track(task, node: TaskNodeWithCompletion(job: self, task: task, completion: completion), queue: nil)
  }

  /// Tracks `task` and adds it to ``taskQueue``; when it finishes, `completion` is called with
  /// it instead of ``taskFinished(_:)``, serially with the job's other callbacks.
  @inlinable
  public func trackAndQueue<T: Operation>(_ task: T, completion: @escaping @Sendable (T) -> Void) {
    track(task, node: TaskNodeWithCompletion(job: self, task: task, completion: completion), queue: queueOfTasks)
  }

  /// Sets the handler called instead of ``taskGroupFinished(_:)`` each time the last unfinished
  /// tracked task whose dynamic type is exactly `group` has been routed (see the type's
  /// documentation for groups that reach zero while `main()` runs). Replaces an earlier handler for
  /// that group. Safe from any thread; set it before the group's tasks finish. As any change of the
  /// job's state, it may run the job's pending callbacks on the calling thread before it returns,
  /// if a finished task waits to be routed and no thread routes (see <doc:RoutingAndThreads>, "One
  /// at a time"). The job drops its handlers when it finishes.
  public func setCompletion<T: Operation>(forGroup group: T.Type, _ handler: @escaping @Sendable () -> Void) {
    let replaced = withJobState { $0.replaceCompletion(forGroup: group, with: handler) }
    // Released after the lock: the old handler may hold the last reference to a user's object.
    _ = replaced
  }

  // MARK: - Stopping

  /// Stops the job with `error`: cancels every unfinished tracked task (and any task tracked
  /// later), runs no further routing callback, and finishes with ``ConcurrentOperation/error``
  /// set to `error` once every tracked task finished. ``run()`` throws `error`.
  ///
  /// Safe from any thread and from the job's callbacks. Ignored if the job was already cancelled,
  /// failed or finished. A cancel that arrives while it stops the job keeps `error` as the
  /// reason and the job still fails with it.
  public func fail(_ error: any Error) {
    failureRequested(error)
  }

  /// Called by ``fail(_:)``: stops the job with `error`. A subclass that must finish work of its
  /// own before the job can finish overrides it and calls `super`; never with a lock held.
  func failureRequested(_ error: any Error) {
    // The stop and its reason in one step (`JobState.stop`).
    stop(.failed(error))
    // As a cancel does: a start that waited for a resume runs now (stopped, the job finishes
    // without `main()`), and a later `suspend()` is a no-op.
    applyResume(forStop: true)
  }

  // MARK: - Callbacks (override points)

  /// Called for a finished task that was tracked without a completion closure. See the routing
  /// rules in the type's documentation; runs serially with the job's other callbacks. Not called
  /// after the job was cancelled or failed. The default implementation does nothing.
  open func taskFinished(_ task: Operation) {}

  /// Called when the last unfinished task of dynamic type `group` has been routed and no handler
  /// was set for the group with ``setCompletion(forGroup:_:)``. Runs after that task's own
  /// callback, serially with the job's other callbacks. The default implementation does nothing.
  open func taskGroupFinished(_ group: Operation.Type) {}

  /// Called when every tracked task has been routed and `main()` has returned. The job finishes
  /// right after this returns, unless it tracked new tasks (then it is called again when those
  /// are done). Not called after the job was cancelled or failed. The default implementation does
  /// nothing.
  open func allTasksFinished() {}

  /// The job's state for a person reading a log: lifecycle (and why it stopped), unfinished
  /// tasks by group with their limits and waiting tasks, failures, and progress. Safe to read
  /// from any thread.
  open override var debugDescription: String {
    debugText()
  }

  // MARK: - ConcurrentOperation

  /// Runs `main()`, then routes finished tasks. Subclasses override `main()`, not this.
  public final override func operationStart() {
    let thread = currentThreadID()
    let (runsMain, timeLimit) = withJobState { ($0.beginMain(on: thread, keeping: self), $0.beginTimeLimit()) }
    if let timeLimit {
      armTimeLimit(timeLimit, used: inheritedScope?.timeAlreadyUsed ?? .zero)
    }
    if runsMain {
      main()
    } else {
      stoppedBeforeMain()
    }
    withJobState { $0.mainReturned() }
  }

  /// A job reacts to `cancel()` by cancelling its tasks (see the type's documentation); this hook
  /// is not used.
  public final override func operationCancelled() {}

  override func cancellationRequested() {
    perform(withJobState(.afterActions, on: currentThreadID()) { $0.cancel() }.result)
  }

  /// Holds back or lets go the tasks the job queues, and suspends or resumes its children (see
  /// `JobState+Suspension.swift`).
  override func suspensionChanged(to isSuspended: Bool, generation: UInt64) {
    applyJobSuspension(isSuspended, generation: generation)
  }

  override func startCancelled() {
    // Cancelled before it started: `main()` does not run, but tasks tracked before the start
    // were cancelled and must still be waited for. Record the stop first: `cancel()` lets the
    // queue start the job (corelibs schedules a cancelled operation at once) before its own
    // `stop(.cancelled)` ran, and nothing may be routed as if the job ran normally.
    cancellationRequested()
    _ = withJobState { $0.beginMain(on: currentThreadID(), keeping: self) }
    stoppedBeforeMain()
    withJobState { $0.mainReturned() }
  }

  /// The job started after it was stopped, so `main()` does not run. Called on the starting
  /// thread before `main()` counts as returned, so the job cannot finish before this returns;
  /// never with a lock held. Lets a subclass finish work that `main()` would have started. Does nothing by
  /// default.
  func stoppedBeforeMain() {}

  /// Called once, right before the job finishes (before `isFinished`), on the thread finishing
  /// it, with no lock held; `cancelled` if a cancel stopped the job. A hook for the floors above
  /// (a group's cancellation handler); does nothing by default.
  func jobWillFinish(cancelled: Bool) {}

  /// Called with no lock held for each task leaving the job's admission line
  /// (`JobAdmission`), before it can be queued, with the admission's shared object: a hook for
  /// the floors above (a group hands its context down). Does nothing by default.
  func prepareForAdmission(_ task: Operation, shared: AnyObject?) {}
}
