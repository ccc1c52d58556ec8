import Foundation

extension JobController {
  /// Registers `task` with `node`, its node (made by the caller, with no lock held), hooks its finish
  /// and queues it on `queue` (unless it waits for a slot of its group's limit). When called
  /// from `main()`, then routes the tasks that had finished (it asks to drain with the same lock,
  /// so `main()`'s thread, which tracks every task, takes it once less per task). Returns the
  /// node, or `nil` if it was not tracked. `bounded`: refused (not tracked) when the task's
  /// group has as many tasks waiting as `setMaxQueuedTasks` allows.
  @discardableResult @inline(__always)  // Measured: out of line, grp-seq +1.2% (Benchmarks/README.md).
  @usableFromInline
  func track(
    _ task: Operation, node: TaskNode, queue: OperationQueue?, replacing previous: TaskNode? = nil,
    bounded: Bool = false
  ) -> TaskNode? {
    var notes = TrackingNotes()
    return track(
      task, node: node, queue: queue, replacing: previous, waitsForDependencies: false, bounded: bounded,
      notes: &notes)
  }

  /// What `track` tells a caller that asks: `mayQueue` is `false` if another job claimed the
  /// task's queueing (this one must never queue it); `jobFinished` if it was not tracked because
  /// the job finished (reported only if `reportsJobFinished`); for a task that waits for
  /// admission, `jobSuspended` if the job's suspension concerned its new children when it was
  /// tracked (see `JobSuspension.concernsNewChildren`).
  struct TrackingNotes {
    var reportsJobFinished = true
    var mayQueue = true
    var jobFinished = false
    var jobSuspended = false
  }

  /// `track`, for a task that `waitsForDependencies` (it is not queued now) or
  /// `waitsForAdmission` (it enters the job's admission line once observed, see
  /// `trackForAdmission`). Inlined: on the hot path it is `trackAndQueue`'s whole work, which
  /// the optimizer would otherwise call out of line.
  @inline(__always)  // Measured: out of line, grp-seq +1.2% (Benchmarks/README.md).
  func track(
    _ task: Operation, node: TaskNode, queue: OperationQueue?, replacing previous: TaskNode?,
    waitsForDependencies: Bool, bounded: Bool = false, waitsForAdmission: Bool = false,
    notes: inout TrackingNotes
  ) -> TaskNode? {
    let thread = currentThreadID()
    let ((outcome, suspended), role) = withJobState(.inTrack, on: thread) { state in
      let outcome = state.track(
        task, node: node, queue: queue, replacing: previous, waitsForDependencies: waitsForDependencies,
        bounded: bounded, waitsForAdmission: waitsForAdmission)
      return (outcome, waitsForAdmission && state.suspension.concernsNewChildren)
    }
    notes.jobSuspended = suspended
    var tracked: TaskNode?
    var routesAgain = false
    switch outcome {
    case .refused:
      break
    case .jobFinished:
      notes.jobFinished = true
      guard notes.reportsJobFinished else { break }
      reportMisuse(
        .trackedAfterJobFinished,
        "\(type(of: task)) was tracked after the job finished; it was neither tracked nor queued"
      )
    case .tracked(let node, let cancel, let queueNow, let waitsForSlot, let observesEvents, let replaced):
      // A replaced attempt's task is released here, after the lock, if this was its last reference.
      _ = replaced
      if cancel {
        task.cancel(handingDown: stopReason())
      }
      switch observeFinish(of: task, node: node, claimingQueue: queue != nil) {
      case .duplicate:
        withJobState { $0.untrackDuplicate(node) }
        reportMisuse(.taskAlreadyTracked, "\(type(of: task)) is already tracked by this job; ignored")
      case .finished(let hook):
        // Events first, so `taskTracked` precedes `taskFinished`.
        if observesEvents {
          confirmTracked(task, node: node)
        }
        reportMisuse(.taskAlreadyFinished, "\(type(of: task)) had already finished when tracked; routed at once")
        if let hook {
          // Signals this node and any job's that joined it meanwhile.
          CompletionBlockHook.signalIfFinishedWhileWrapping(task, hook)
        } else {
          taskDidFinish(node)
        }
        tracked = node
        routesAgain = true
      case .observed(let mayQueue, let installedHook):
        notes.mayQueue = mayQueue
        // Before the task can start: its tracking time and start observer must be in place.
        if observesEvents {
          confirmTracked(task, node: node)
        }
        handDownScope(to: task, queuedHere: mayQueue && queue != nil)
        var queuedNow = false
        if mayQueue, queueNow, let queue {
          queuedNow = enqueue(task, on: queue)
        }
        if let installedHook, !queuedNow {
          // Not queued here: the task may have finished while its block was being wrapped.
          CompletionBlockHook.signalIfFinishedWhileWrapping(task, installedHook)
        }
        if waitsForAdmission, mayQueue, let queue {
          enterAdmission(node, queue: queue)
        }
        if waitsForSlot, mayQueue, let queue {
          if withJobState({ $0.admitOrWait(node, queue: queue) }) {
            enqueue(task, on: queue)
          }
        }
        tracked = node
      }
    }
    if role == .none, routesAgain {
      // The task that had finished before it was tracked is routed in this call too.
      drainIfIdle(inTrack: true)
    } else {
      drain(role, on: thread, inTrack: true)
    }
    return tracked
  }

  /// Events are listened to: emits `taskTracked` and registers for the task's start.
  func confirmTracked(_ task: Operation, node: TaskNode) {
    let name = task.name
    let now = ContinuousClock.now
    let followers = withJobState { $0.confirmTracked(node, name: name, at: now) }
    if !followers.isEmpty, let nested = task as? JobController {
      for follower in followers {
        follower.follow(nested, trackedBy: self)
      }
    }
    if let operation = task as? ConcurrentOperation {
      _ = operation.addStartObserver(node)
    }
  }

  private enum Observation {
    /// The job now hears of the task's finish; `mayQueue` unless another job queues it. A plain
    /// operation whose completion block this job wrapped has `installedHook`: unless the caller
    /// queues the task itself at once, it must check whether the task finished meanwhile.
    case observed(mayQueue: Bool, installedHook: CompletionBlockHook.Hook?)
    /// This job already tracks the task: the new node must be dropped.
    case duplicate
    /// The task had finished before it was tracked: route it at once (a plain operation by
    /// signalling its registered `hook`).
    case finished(CompletionBlockHook.Hook?)
  }

  /// Arranges for `node` to be signalled once `task` finished. When the job will queue the task
  /// (`claimingQueue`: now or once it gets a slot), it claims the queueing first; if another job
  /// claimed it, the task is observed but this job never queues it (reported as
  /// ``JobKitError/Code/taskAlreadyQueued``). Queues nothing: the caller does, after it
  /// registered everything that must be in place when the task starts.
  private func observeFinish(of task: Operation, node: TaskNode, claimingQueue: Bool) -> Observation {
    if let operation = task as? ConcurrentOperation {
      switch operation.addFinishObserver(node, claimingQueue: claimingQueue) {
      case .observing(claimed: true):
        return .observed(mayQueue: true, installedHook: nil)
      case .observing(claimed: false):
        reportAlreadyQueued(task)
        return .observed(mayQueue: false, installedHook: nil)
      case .alreadyObserved:
        return .duplicate
      case .finished:
        return .finished(nil)
      }
    }
    // A plain operation: `observe` asks whether it finished, right before it wraps the block.
    switch CompletionBlockHook.observe(task, by: node, claimingQueue: claimingQueue) {
    case .duplicate:
      return .duplicate
    case .finished(let hook):
      return .finished(hook)
    case .joined(claimed: false):
      reportAlreadyQueued(task)
      return .observed(mayQueue: false, installedHook: nil)
    case .joined(claimed: true):
      return .observed(mayQueue: true, installedHook: nil)
    case .installed(let hook, let claimed):
      if !claimed {
        reportAlreadyQueued(task)
      }
      return .observed(mayQueue: claimed, installedHook: hook)
    }
  }

  private func reportAlreadyQueued(_ task: Operation) {
    reportMisuse(
      .taskAlreadyQueued, "\(type(of: task)) is already queued by a job; tracked, not queued a second time")
  }
}

/// Tracking with ``TaskOptions``: a timeout per attempt, retries, or both.
extension JobController {
  /// Tracks a task made by `make`, with a timeout for each attempt and a retry policy, either or
  /// both (see ``TaskOptions``); each attempt is added to ``taskQueue``. When it finishes,
  /// `completion` gets it instead of ``taskFinished(_:)``, serially with the job's other
  /// callbacks.
  ///
  /// `make(attempt)` builds a fresh operation for each attempt (1, 2, …): an `Operation` cannot
  /// run twice. With a timeout, each attempt still running after `options.timeout` is cancelled
  /// and counts as failed with ``JobKitError/Code/timedOut``; with a retry policy too, such an
  /// attempt is retried like any failed one (if `retryIf` agrees with that error), once it has
  /// actually finished. Routing sees one finished task: the successful attempt, or the last
  /// failed one. `make` runs on the thread that tracks the first attempt, then on the thread
  /// that ends a retry delay, never while JobKit holds a lock.
  public func trackAndQueue<T: Operation>(
    options: TaskOptions,
    _ make: @escaping @Sendable (_ attempt: Int) -> T,
    completion: @escaping @Sendable (T) -> Void
  ) {
    trackAttempt(1, options: options, make: make, completion: completion, replacing: nil)
  }

  /// Like ``trackAndQueue(options:_:completion:)``, without a completion closure: the task that
  /// finished (the successful attempt, or the last failed one) is routed to ``taskFinished(_:)``.
  public func trackAndQueue<T: Operation>(
    options: TaskOptions,
    _ make: @escaping @Sendable (_ attempt: Int) -> T
  ) {
    trackAttempt(1, options: options, make: make, completion: nil, replacing: nil)
  }

  /// Tracks `task`, adds it to ``taskQueue`` and cancels it if it still runs after `timeout`,
  /// like ``trackAndQueue(_:timeout:completion:)``, but the finished task is routed to
  /// ``taskFinished(_:)``.
  public func trackAndQueue(_ task: Operation, timeout: Duration) {
    trackAttempt(1, options: TaskOptions(timeout: timeout), make: { _ in task }, completion: nil, replacing: nil)
  }

  /// Makes attempt `number`, tracks it (in place of `previous`, the failed attempt before it)
  /// and arms its timeout.
  func trackAttempt<T: Operation>(
    _ number: Int,
    options: TaskOptions,
    make: @escaping @Sendable (Int) -> T,
    completion: (@Sendable (T) -> Void)?,
    replacing previous: TaskNode?
  ) {
    let task = make(number)
    let attempt = options.retry.map { policy in
      RetryAttempt(number: number, policy: policy) { [unowned self] failed in
        trackAttempt(number + 1, options: options, make: make, completion: completion, replacing: failed)
      }
    }
    let node: TaskNode
    if let completion {
      node = TaskNodeWithCompletion(job: self, task: task, retry: attempt, completion: completion)
    } else {
      node = TaskNode(job: self, task: task, retry: attempt)
    }
    if let node = track(task, node: node, queue: queueOfTasks, replacing: previous), let timeout = options.timeout {
      armTimeout(timeout, for: node)
    }
  }
}

extension JobController {
  private static let defaultTaskQueueStorage = LockedBox<OperationQueue?>(nil)

  /// The queue that jobs created without one (``JobController/init()``, and groups created
  /// without a `taskQueue`) add their tasks to: `nil` by default, and then each such job makes a
  /// concurrent queue of its own.
  ///
  /// Set it once, early (for example at program start), to run the tasks of every job and group
  /// on one queue you configured, such as one with a `maxConcurrentOperationCount`:
  ///
  /// ```swift
  /// let work = OperationQueue()
  /// work.maxConcurrentOperationCount = 4
  /// JobController.defaultTaskQueue = work
  /// ```
  ///
  /// Safe to set from any thread; a job reads it once, when it is created, so a change applies to
  /// jobs created afterwards. Keep it a concurrent queue if jobs nest: with a serial default
  /// queue, a group running as a task of another group would wait for a slot its parent holds.
  public static var defaultTaskQueue: OperationQueue? {
    get { defaultTaskQueueStorage.withLock { $0 } }
    set {
      let replaced = defaultTaskQueueStorage.withLock { exchange(&$0, with: newValue) }
      _ = replaced  // released after the lock: it may be the user's queue (or subclass)
    }
  }
}
