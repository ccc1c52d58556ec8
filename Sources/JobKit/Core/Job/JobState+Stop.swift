import Foundation

/// Stopping a job (a cancel, a fail, a `.failFast` failure, a time limit): what is cancelled,
/// released and handed down, decided under the job's lock.
extension JobState {
  struct StopActions {
    /// Unfinished tasks to cancel. Those waiting for a group slot stay in line: each is queued
    /// once it gets a slot, and finishes at once, without running.
    var cancel: [Operation] = []
    /// Armed timeouts and pending retries to cancel.
    var timers: [any JobTimer] = []
    /// The stop was recorded now, with tasks still tracked: the caller arms the grace period.
    var armsGrace = false
    /// Tasks the stop lets go, carried out after the cancels, so they finish without running:
    /// first those a suspension held back or a rate limit kept waiting (queued), then those that
    /// waited for the job's admission (each started on the stopping thread).
    var exits: [TaskExit] = []
    /// Held tasks that finished while the job was suspended: released with the actions, after
    /// the lock.
    var released: [TaskNode] = []
    /// Why the job stops, handed down to what it cancels (``JobState/stopReason``); `nil` when
    /// the job was stopping already and nothing is to be done.
    var reason: (any Error)?
    /// The reason a failing stop replaced, released with the actions, after the lock (an error
    /// is a user's value: its `deinit` may be user code).
    var replacedReason: (any Error)?
  }

  /// Applies a transition of the job's operation state (`ConcurrentOperation`'s, reached
  /// through the job's operation door, `JobController.withStateLocked`).
  mutating func withOperation<Result>(_ transition: (inout OperationState) -> Result) -> Result {
    transition(&operation)
  }

  /// Why the job stops, as it hands it down to what it cancels: its operation's reason (a
  /// failing stop's error, recorded with the stop; else the first reason a cancel recorded),
  /// `CancellationError` if none.
  var stopReason: any Error {
    operation.cancellationReason ?? CancellationError()
  }

  /// `cancel()` reached the job, after its operation state recorded the cancel and its reason:
  /// stops it with that reason (a plain cancel's `CancellationError` left out, as the
  /// `taskFinished` event leaves it out). If a failing stop came first, nothing changes.
  mutating func cancel() -> StopActions {
    let reason = operation.cancellationReason
    return stop(.cancelled(reason: reason.flatMap { $0 is CancellationError ? nil : $0 }))
  }

  /// Stops the job (first stop wins). A failing stop (a `fail(_:)`, a `.failFast` failure, a
  /// time limit) records its error as the operation's reason in the same step, replacing a
  /// cancel's: the job fails with it, and its `error` and `cancellationReason` agree. Returns
  /// what the caller must cancel or release.
  mutating func stop(_ reason: Stop) -> StopActions {
    var actions = StopActions()
    guard phase.recordStop(reason) else { return actions }
    if case .failed(let error) = reason {
      actions.replacedReason = operation.recordFailingStop(error)
    }
    actions.reason = stopReason
    (actions.exits, actions.released) = endSuspensionForStop()
    // Producers waiting for room are woken (`waitForRoom` throws the job's reason): admission
    // effects, which the door takes with this lock.
    actions.exits += dropRateLimitsForStop()
    actions.armsGrace = cancellationGracePeriod != nil && !registry.isEmpty
    for node in registry.nodes {
      switch node.stop() {
      case .cancel(let timer):
        if let timer { actions.timers.append(timer.timer) }
        if let task = node.task { actions.cancel.append(task) }
      case .finishedRetry(let timer):
        // The failed attempt is the task's last one: route it now (silently).
        if let timer { actions.timers.append(timer.timer) }
        outbox.route(node)
        if keeper.isKeptByTasks {
          afterLockEffects.release(keeper.letGo(of: node))
        }
      case .none:
        break
      }
    }
    // Cancelled above (they are tracked), started by the caller after the cancels.
    actions.exits += releaseAdmissionForStop()
    return actions
  }

  /// The job is freed before it finished (it never started): each unrouted node lets go of its
  /// task, which holds the node as its finish observer. Returns the nodes with their tasks: after
  /// the lock, the caller detaches each node from its task (`TaskNode.detach(from:)`), so that no
  /// observer with the freed job stays behind, then releases them (a task's `deinit` is user code).
  mutating func abandon() -> [(node: TaskNode, task: Operation)] {
    var abandoned: [(node: TaskNode, task: Operation)] = []
    for node in registry.nodes {
      if let task = node.letGoOfTask() {
        abandoned.append((node, task))
      }
    }
    registry.removeAll()
    return abandoned
  }
}
