import Foundation

extension JobController {
  /// Registers `task` (with the node `makeNode` builds), then queues it or hooks its finish. When
  /// called from `main()`, first routes the tasks that already finished.
  func track(_ task: Operation, queue: OperationQueue?, makeNode: (TaskGroupEntry) -> TrackedTask) {
    let outcome = jobState.withLock { $0.track(task, makeNode: makeNode) }
    switch outcome {
    case .jobFinished:
      reportMisuse(
        .trackedAfterJobFinished,
        "\(type(of: task)) was tracked after the job finished; it was neither tracked nor queued"
      )
    case .alreadyTracked:
      reportMisuse(.taskAlreadyTracked, "\(type(of: task)) is already tracked by this job; ignored")
    case .tracked(let node, let cancel):
      if cancel {
        task.cancel()
      }
      observeFinish(of: task, node: node, queue: queue)
    }
    routeFinishedInMain()
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

  /// Arranges for `node` to be signalled once `task` finished, and adds `task` to `queue`.
  private func observeFinish(of task: Operation, node: TrackedTask, queue: OperationQueue?) {
    if let operation = task as? ConcurrentOperation {
      if operation.addFinishObserver(node) {
        guard let queue else { return }
        if operation.isExecuting {
          reportMisuse(.taskAlreadyRunning, "\(type(of: task)) is already running; tracked, not queued again")
        } else {
          queue.addOperation(operation)
        }
        return
      }
    } else if !task.isFinished {
      task.completionBlock = { [node] in node.completionBlockDidRun() }
      if let queue {
        if !task.isExecuting {
          queue.addOperation(task)
          return
        }
        reportMisuse(.taskAlreadyRunning, "\(type(of: task)) is already running; tracked, not queued again")
      }
      guard task.isFinished else { return }
      // The task finished while its completionBlock was being wrapped, so Foundation may have
      // taken either block. Put the task's own block back (if Foundation took the wrapper, the
      // wrapper still runs the task's block once) and signal; a second signal is ignored.
      task.completionBlock = node.previousCompletionBlock
      taskDidFinish(node)
      return
    }
    reportMisuse(.taskAlreadyFinished, "\(type(of: task)) had already finished when tracked; routed at once")
    taskDidFinish(node)
  }

  /// A tracked task finished: queue it for routing, and route now if no other thread is routing.
  func taskDidFinish(_ node: TrackedTask) {
    if jobState.withLock({ $0.taskFinished(node) }) {
      route()
    }
  }

  func stop(_ reason: JobState.Stop) {
    let tasks = jobState.withLock { $0.stop(reason) }
    for task in tasks {
      task.cancel()
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
        if case .finish(let error)? = jobState.withLock({ $0.allTasksFinishedReturned() }) {
          operationDone(error: error)
          return
        }
      case .finish(let error):
        operationDone(error: error)
        return
      case .release:
        return
      }
    }
  }

  private func routeOne(_ node: TrackedTask) {
    // The node was signalled, so nobody but this router touches `node.task` any more.
    guard let task = node.task else { return }
    if jobState.withLock({ $0.shouldDeliverCallbacks }) {
      if !node.deliverCompletion(task) {
        taskFinished(task)
      }
    }
    deliver(jobState.withLock { $0.routed(node) })
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
