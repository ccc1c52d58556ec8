import Foundation

/// Routing and draining: what transitions leave in the job's ``Outbox`` (finished tasks to
/// route, events, progress) is performed after the lock by one thread at a time, the drainer:
/// a finished task's callbacks, then its group's, then `allTasksFinished()`, serially (see the
/// type's documentation).
extension JobController {
  /// Applies `transition` under the job's lock, then drains the outbox if this thread must.
  @inline(__always)
  func withJobState<Result>(_ transition: (inout JobState) -> Result) -> Result {
    let thread = currentThreadID()
    let (result, role) = jobState.withLock { state in
      (transition(&state), state.claimDrain(on: thread))
    }
    if role != .none {
      drain(role, on: thread)
    }
    return result
  }

  /// Drains as `role` says (see ``Outbox/Role``); `inTrack` for a `track` call of `main()`.
  func drain(_ role: Outbox<TrackedTask, PendingJobEvent>.Role, on thread: UInt, inTrack: Bool = false) {
    switch role {
    case .none:
      return
    case .nested:
      _ = perform(jobState.withLock { $0.nestedDrain() })
    case .drainer:
      while let batch = jobState.withLock({ $0.nextDrain(on: thread, inTrack: inTrack) }) {
        if !perform(batch) { return }
      }
    }
  }

  /// Asks to drain after a change made without ``withJobState(_:)`` (a stop, once its tasks
  /// were cancelled).
  func drainIfIdle() {
    let thread = currentThreadID()
    drain(jobState.withLock { $0.claimDrain(on: thread) }, on: thread)
  }

  /// Performs one batch: events, progress, then its work. Returns `false` once the job finished
  /// (the drainer was released with that batch).
  private func perform(_ batch: JobState.Drain) -> Bool {
    if let delivery = batch.events {
      deliver(delivery)
    }
    if let (progress, total, completed) = batch.progress {
      // No lock is held while `Progress` changes (on Apple platforms its KVO observers run now).
      progress.totalUnitCount = total
      progress.completedUnitCount = completed
    }
    switch batch.item {
    case .none:
      return true
    case .route(let node):
      routeOne(node)
      return true
    case .step(.none):
      return true
    case .step(.group(let outcome)):
      deliver(outcome)
      return true
    case .step(.allTasksFinished):
      allTasksFinished()
      guard let last = jobState.withLock({ $0.drainAfterAllTasksFinished() }) else { return true }
      return perform(last)
    case .step(.finish(let finish)):
      finish.graceTimer?.cancel()
      jobWillFinish(cancelled: finish.cancelled)
      operationDone(error: finish.error)
      return false
    }
  }

  /// Stamps and yields a batch of events, ending the streams after the job's last event.
  private func deliver(_ delivery: JobEventListeners.Delivery) {
    let now = ContinuousClock.now
    for pending in delivery.events {
      let event = pending.stamped(now)
      for listener in delivery.listeners {
        listener.yield(event)
      }
    }
    if delivery.close {
      for listener in delivery.listeners {
        listener.finish()
      }
    }
  }

  /// A tracked task finished: retry it if its policy says so, else queue it for routing (and
  /// route now if nobody drains), and start the next task waiting for its slot.
  func taskDidFinish(_ node: TrackedTask) {
    if let retry = node.retry, scheduleRetry(of: node, retry) {
      return
    }
    // `timing` never changes once the node is published: read it without the lock.
    let now = node.timing != nil ? ContinuousClock.now : nil
    let thread = currentThreadID()
    let (actions, role) = jobState.withLock { state in
      (state.taskFinished(node, at: now), state.claimDrain(on: thread))
    }
    if let timeout = actions.timeout {
      timeout.cancel()
    }
    if !actions.admitted.isEmpty {
      queueAdmitted(actions.admitted)
    }
    drain(role, on: thread)
  }

  func stop(_ reason: JobState.Stop) {
    perform(jobState.withLock { $0.stop(reason) })
  }

  /// Carries out a stop that was recorded: now, or, when this thread is carrying out another
  /// stop (a parent job cancelling this one), right after it, so stops of nested jobs never pile
  /// up on the stack (see `ThreadDrain`).
  func perform(_ actions: JobState.StopActions) {
    ThreadDrain.perform(actions, of: self)
  }

  /// Carries out a stop: cancels timers, arms the grace period, cancels tasks, drains.
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
    drainIfIdle()
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
    let name = node.timing != nil ? task.name : nil
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
    deliver(withJobState { $0.routed(node) })
  }

  /// The failure a finished task stands for, if any: a timeout, or a `ConcurrentOperation` error.
  private func failure(of task: Operation, node: TrackedTask) -> TaskFailure? {
    // The task finished: only this router changes its state now, so it is read without the lock.
    if node.state.timedOut {
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
