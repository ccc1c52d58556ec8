import Foundation

extension JobController {
  /// Registers `task` (with the node `makeNode` builds), hooks its finish and queues it on
  /// `queue` (unless it waits for a slot of its group's limit). When called from `main()`, first
  /// routes the tasks that already finished. Returns the node, or `nil` if it was not tracked.
  @discardableResult
  func track(
    _ task: Operation,
    queue: OperationQueue?,
    replacing previous: TrackedTask? = nil,
    makeNode: (TaskGroupEntry) -> TrackedTask
  ) -> TrackedTask? {
    let outcome = jobState.withLock { $0.track(task, queue: queue, replacing: previous, makeNode: makeNode) }
    var tracked: TrackedTask?
    switch outcome {
    case .jobFinished:
      reportMisuse(
        .trackedAfterJobFinished,
        "\(type(of: task)) was tracked after the job finished; it was neither tracked nor queued"
      )
    case .alreadyTracked:
      reportMisuse(.taskAlreadyTracked, "\(type(of: task)) is already tracked by this job; ignored")
    case .tracked(let node, let cancel, let queueNow, let waitsForSlot, let observeStart, let publish):
      if let publish {
        publishProgress(to: publish)
      }
      if cancel {
        task.cancel()
      }
      if observeStart, let operation = task as? ConcurrentOperation {
        _ = operation.setStartObserver(node)
      }
      let mayQueue = observeFinish(of: task, node: node, queue: queue, queueNow: queueNow)
      if waitsForSlot, mayQueue, let queue, jobState.withLock({ $0.admitOrWait(node) }) {
        enqueue(task, on: queue)
      }
      tracked = node
    }
    routeFinishedInMain()
    return tracked
  }

  /// If the caller is `main()`, routes (per-task callbacks only) the tasks that finished so far,
  /// so a `main()` that tracks many tasks does not hold every finished one until it returns.
  private func routeFinishedInMain() {
    var batch = jobState.withLock { $0.beginRoutingInMain(on: currentThreadID()) }
    while !batch.isEmpty {
      for node in batch {
        routeOne(node)
      }
      batch = jobState.withLock { $0.nextBatchInMain() }
    }
  }

  /// Arranges for `node` to be signalled once `task` finished, and adds `task` to `queue` if
  /// `queueNow`. When the job will queue the task (`queue` set, now or once it gets a slot), it
  /// claims the queueing first. Returns `false` if another job claimed it: the task is observed
  /// but this job never queues it (reported as ``JobKitError/Code/taskAlreadyQueued``).
  private func observeFinish(of task: Operation, node: TrackedTask, queue: OperationQueue?, queueNow: Bool) -> Bool {
    let claiming = queue != nil
    if let operation = task as? ConcurrentOperation {
      switch operation.addFinishObserver(node, claimingQueue: claiming) {
      case true?:
        if let queue, queueNow {
          enqueue(operation, on: queue)
        }
        return true
      case false?:
        reportAlreadyQueued(task)
        return false
      case nil:
        break
      }
    } else if !task.isFinished {
      let (hook, claimed) = CompletionBlockHook.observe(task, by: node, claimingQueue: claiming)
      if !claimed {
        reportAlreadyQueued(task)
      } else if let queue, queueNow, enqueue(task, on: queue) {
        return true
      }
      if let hook {
        // Not queued here: the task may have finished while its block was being wrapped.
        CompletionBlockHook.signalIfFinishedWhileWrapping(task, hook)
      }
      return claimed
    }
    reportMisuse(.taskAlreadyFinished, "\(type(of: task)) had already finished when tracked; routed at once")
    taskDidFinish(node)
    return false
  }

  private func reportAlreadyQueued(_ task: Operation) {
    reportMisuse(
      .taskAlreadyQueued, "\(type(of: task)) is already queued by a job; tracked, not queued a second time")
  }

  /// Queues tasks that were waiting for a slot of their group's limit and just got one.
  func queueAdmitted(_ nodes: [TrackedTask]) {
    for node in nodes {
      if let task = node.task, let queue = node.extras?.pendingQueue {
        enqueue(task, on: queue)
      }
    }
  }

  /// Adds `task` to `queue` unless it is already executing (a second `addOperation` would be a
  /// fatal error in Foundation). Returns whether it was added.
  @discardableResult
  private func enqueue(_ task: Operation, on queue: OperationQueue) -> Bool {
    if task.isExecuting || task.isFinished {
      reportMisuse(.taskAlreadyRunning, "\(type(of: task)) is already running; tracked, not queued again")
      return false
    }
    queue.addOperation(task)
    return true
  }

  /// A tracked task finished: retry it if its policy says so, else queue it for routing (and
  /// route now if no other thread is routing), and start the next task waiting for its slot.
  func taskDidFinish(_ node: TrackedTask) {
    if let retry = node.extras?.retry, scheduleRetry(of: node, retry) {
      return
    }
    let actions = jobState.withLock { $0.taskFinished(node) }
    actions.timeout?.cancel()
    queueAdmitted(actions.admitted)
    if actions.route {
      route()
    }
  }

  /// If `node`'s attempt failed and its policy allows another, schedules the next attempt after
  /// the policy's delay on the job's clock (no thread waits) and returns `true`. The failed
  /// attempt gives its group slot back meanwhile.
  private func scheduleRetry(of node: TrackedTask, _ retry: RetryAttempt) -> Bool {
    guard retry.number < retry.policy.maxAttempts,
      let error = (node.operation as? ConcurrentOperation)?.error,
      !(error is CancellationError), !node.operation.isCancelled,
      retry.policy.retryIf(error)
    else { return false }
    guard let admitted = jobState.withLock({ $0.beginRetry(of: node) }) else { return false }
    queueAdmitted(admitted)
    var generator = SystemRandomNumberGenerator()
    let delay = retry.policy.delay(beforeAttempt: retry.number + 1, using: &generator)
    // Weak: a timer that outlives the job (a clock may hold cancelled timers) must not keep it.
    let timer = clock.schedule(after: delay) { [weak self, weak node] in
      guard let self, let node, self.jobState.withLock({ $0.claimRetry(of: node) }) else { return }
      retry.trackNext(node)
    }
    if !jobState.withLock({ $0.retryScheduled(timer, for: node) }) {
      timer.cancel()
    }
    return true
  }

  /// Arms a timeout for `node` on the job's clock: if its task still runs after `timeout`, it is
  /// cancelled and counts as failed with ``JobKitError/Code/timedOut``.
  func armTimeout(_ timeout: Duration, for node: TrackedTask) {
    guard jobState.withLock({ $0.armTimeout(for: node) }) else { return }
    let timer = clock.schedule(after: timeout) { [weak self, weak node] in
      // Ask the task whether it finished with no lock held (`isFinished` may be overridden).
      guard let self, let node, let task = self.jobState.withLock({ $0.armedTask(of: node) }), !task.isFinished,
        let expired = self.jobState.withLock({ $0.timeoutExpired(for: node) })
      else { return }
      expired.cancel()
    }
    if !jobState.withLock({ $0.timeoutScheduled(timer, for: node) }) {
      timer.cancel()
    }
  }

  func stop(_ reason: JobState.Stop) {
    perform(jobState.withLock { $0.stop(reason) })
  }

  /// Carries out a stop: cancels timers and tasks, releases tasks that waited for a slot, routes.
  func perform(_ actions: JobState.StopActions) {
    for timer in actions.timers {
      timer.cancel()
    }
    for task in actions.cancel {
      task.cancel()
    }
    for (task, queue) in actions.release {
      enqueue(task, on: queue)
    }
    if actions.route {
      route()
    }
  }

  /// The router: runs callbacks until there is nothing left to route, then releases the router
  /// (or finishes the job). Only the thread that holds the router calls it.
  func route() {
    while true {
      switch jobState.withLock({ $0.nextStep() }) {
      case .route(let batch):
        for node in batch {
          routeOne(node)
        }
      case .group(let outcome):
        deliver(outcome)
      case .allTasksFinished:
        allTasksFinished()
        switch jobState.withLock({ $0.allTasksFinishedReturned() }) {
        case nil:
          continue
        case .finish(let finish)?:
          perform(finish)
          return
        case .some:
          return
        }
      case .finish(let finish):
        perform(finish)
        return
      case .release:
        return
      }
    }
  }

  /// Publishes the final progress counts, finishes the job, then ends the event streams (after
  /// `isFinished` became `true`).
  private func perform(_ finish: JobFinish) {
    if let progress = finish.publish {
      publishProgress(to: progress)
    }
    operationDone(error: finish.error)
    for listener in finish.listeners {
      listener.finish()
    }
  }

  /// Writes the job's counts to `progress` until they stop changing; the caller was made the
  /// publisher by a transition. No lock is held while `Progress` changes (on Apple platforms its
  /// KVO observers run then). Finishes the job if its finish waited for this publication.
  func publishProgress(to progress: Progress) {
    while true {
      switch jobState.withLock({ $0.progress.nextPublication() }) {
      case .write(let total, let completed):
        progress.totalUnitCount = total
        progress.completedUnitCount = completed
      case .done:
        return
      case .finishJob:
        if let finish = jobState.withLock({ $0.takePendingFinish() }) {
          perform(finish)
        }
        return
      }
    }
  }

  /// A tracked `ConcurrentOperation` started while events were listened to.
  func taskDidStart(_ node: TrackedTask) {
    jobState.withLock { $0.taskStarted(node) }
  }

  private func routeOne(_ node: TrackedTask) {
    // The node was signalled, so nobody but this router touches `node.task` any more.
    guard let task = node.task else { return }
    let failure = failure(of: task, node: node)
    switch jobState.withLock({ $0.beginRouting(node, failure: failure, isCancelled: task.isCancelled) }) {
    case .deliver:
      if !node.deliverCompletion(task) {
        taskFinished(task)
      }
    case .skip:
      break
    case .failFast(let actions):
      perform(actions)
    }
    let (outcome, publish) = jobState.withLock { $0.routed(node) }
    if let publish {
      publishProgress(to: publish)
    }
    deliver(outcome)
  }

  /// The failure a finished task stands for, if any: a timeout, or a `ConcurrentOperation` error.
  private func failure(of task: Operation, node: TrackedTask) -> TaskFailure? {
    if let extras = node.extras, jobState.withLock({ _ in extras.timedOut }) {
      return TaskFailure(task: task, error: JobKitError(.timedOut, message: "\(type(of: task)) timed out"))
    }
    guard let operation = task as? ConcurrentOperation, let error = operation.error else { return nil }
    return TaskFailure(task: task, error: error)
  }

  private func deliver(_ outcome: JobState.GroupOutcome) {
    switch outcome {
    case .none:
      break
    case .handler(let handler):
      handler()
    case .taskGroupFinished(let group):
      taskGroupFinished(group)
    }
  }
}

/// An identifier of the calling thread, cheap enough to compare on every `track` call.
func currentThreadID() -> UInt {
  #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
  #else
    return UInt(pthread_self())
  #endif
}
