import Foundation

/// Routing: a finished task's callbacks, then its group's, then `allTasksFinished()`, serially,
/// by whichever thread holds the router (see the type's documentation).
extension JobController {
  /// A tracked task finished: retry it if its policy says so, else queue it for routing (and
  /// route now if no other thread is routing), and start the next task waiting for its slot.
  func taskDidFinish(_ node: TrackedTask) {
    if let retry = node.extras?.retry, scheduleRetry(of: node, retry) {
      return
    }
    // `observesEvents` never changes once the node is published: read it without the lock.
    let now = node.extras?.observesEvents == true ? ContinuousClock.now : nil
    let actions = jobState.withLock { $0.taskFinished(node, at: now) }
    if let timeout = actions.timeout {
      timeout.cancel()
    }
    if !actions.admitted.isEmpty {
      queueAdmitted(actions.admitted)
    }
    if actions.route {
      route()
    }
  }

  func stop(_ reason: JobState.Stop) {
    perform(withJobState { $0.stop(reason) })
  }

  /// Carries out a stop that was recorded: now, or, when this thread is carrying out another
  /// stop (a parent job cancelling this one), right after it, so stops of nested jobs never pile
  /// up on the stack (see `ThreadDrain`).
  func perform(_ actions: JobState.StopActions) {
    ThreadDrain.perform(actions, of: self)
  }

  /// Carries out a stop: cancels timers, arms the grace period, cancels tasks, routes.
  func performNow(_ actions: JobState.StopActions) {
    for timer in actions.timers {
      timer.cancel()
    }
    // Before anything here can let the job finish, which cancels the grace period's timer.
    if actions.armsGrace {
      armCancellationGrace()
    }
    for task in actions.cancel {
      task.cancel()
    }
    if !actions.admitted.isEmpty {
      queueAdmitted(actions.admitted)
    }
    if actions.route {
      route()
    }
  }

  /// The router: runs callbacks until there is nothing left to route, then releases the router
  /// (or finishes the job). Only the thread that holds the router calls it.
  func route() {
    while true {
      switch withJobState({ $0.nextStep() }) {
      case .route(let batch):
        for node in batch {
          routeOne(node)
        }
      case .group(let outcome):
        deliver(outcome)
      case .allTasksFinished:
        allTasksFinished()
        switch withJobState({ $0.allTasksFinishedReturned() }) {
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

  /// Publishes the final progress counts, then finishes the job. (The event streams end once
  /// their last events, `finished` included, were delivered.)
  func perform(_ finish: JobFinish) {
    finish.graceTimer?.cancel()
    if let progress = finish.publish {
      publishProgress(to: progress)
    }
    jobWillFinish(cancelled: finish.cancelled)
    operationDone(error: finish.error)
  }

  /// A tracked `ConcurrentOperation` started while events were listened to.
  func taskDidStart(_ node: TrackedTask) {
    let name = node.operation.name
    let now = ContinuousClock.now
    withJobState { $0.taskStarted(node, name: name, at: now) }
  }

  func routeOne(_ node: TrackedTask) {
    // The node was signalled, so nobody but this router touches `node.task` any more.
    guard let task = node.task else { return }
    let failure = failure(of: task, node: node)
    // Only a failure asks whether the task was cancelled (corelibs' `isCancelled` takes a lock).
    let isCancelled = failure != nil && task.isCancelled
    let name = node.extras?.observesEvents == true ? task.name : nil
    switch withJobState({ $0.beginRouting(node, failure: failure, isCancelled: isCancelled, name: name) }) {
    case .deliver:
      if !node.deliverCompletion(task) {
        taskFinished(task)
      }
    case .skip:
      break
    case .failFast(let actions):
      perform(actions)
    }
    let (outcome, publish) = withJobState { $0.routed(node) }
    if let publish {
      publishProgress(to: publish)
    }
    deliver(outcome)
  }

  /// The failure a finished task stands for, if any: a timeout, or a `ConcurrentOperation` error.
  private func failure(of task: Operation, node: TrackedTask) -> TaskFailure? {
    if node.extras != nil, jobState.withLock({ $0.timedOut(node) }) {
      return TaskFailure(task: task, error: JobKitError.timedOut(task))
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
