import Foundation

/// What ``SequentialGroup`` and ``ConcurrentGroup`` share: a ``JobController`` whose tasks come
/// from `add` and whose next step ``GroupState`` decides in the job's callbacks.
///
/// Added tasks wait in the group until they may start; then they are tracked with the job and
/// added to its `taskQueue`, with a completion closure that starts what comes next. The groups
/// set the job's failure policy to `.collect` in `init`, so a group with failed tasks finishes
/// with ``JobFailures``.
/// A cancel (seen through the job's internal cancellation hook), a stop on failure, or the job's
/// finish cancels the tasks still waiting and starts them untracked, so they finish at once
/// without running their work.
protocol GroupJob: JobController, ContextSharing, OperationFinishObserver {
  var groupState: LockedBox<GroupState> { get }
}

extension GroupJob {
  /// The groups' common `init` step: failures are collected, `tasks` are added in order.
  func setUp(adding tasks: [Operation]) {
    failurePolicy = .collect
    for task in tasks {
      addTask(task, reportingRejection: true)
    }
  }

  /// Adds `task`. Returns `false`, changing nothing, when the group is done; that is reported as
  /// ``JobKitError/Code/trackedAfterJobFinished`` if `reportingRejection` is `true`.
  @discardableResult
  func addTask(_ task: Operation, reportingRejection: Bool) -> Bool {
    switch groupState.withLock({ $0.add(task) }) {
    case .rejected:
      if reportingRejection {
        reportMisuse(
          .trackedAfterJobFinished,
          "\(type(of: task)) was added to \(type(of: self)) after the group finished; it was not started"
        )
      }
      return false
    case .duplicate:
      reportMisuse(.taskAlreadyTracked, "\(type(of: task)) was added to \(type(of: self)) twice; ignored")
      return true
    case .accepted(let launch):
      self.launch(launch)
      return true
    }
  }

  /// Carries out `launch` (see ``GroupState/Launch``). Never called with a lock held.
  func launch(_ launch: GroupState.Launch) {
    for task in launch.tasks {
      if launch.cancelled {
        finishCancelled(task)
      } else {
        launch.context.inject(into: task)
        trackAndQueue(task) { [unowned self] task in
          self.groupTaskFinished(task)
        }
      }
    }
    var gate = launch.gate
    if launch.inFlight, let opened = groupState.withLock({ $0.endInFlight() }) {
      gate = opened
    }
    gate?.start()
  }

  /// Cancels `task`, which was never started, and starts it on this thread, untracked, so it
  /// finishes at once without running its work. A task that is not ready yet goes to the queue,
  /// which starts it as soon as it is; one that runs or finished elsewhere is left alone (queueing
  /// it again would be a fatal error in Foundation).
  private func finishCancelled(_ task: Operation) {
    task.cancel()
    guard !task.isExecuting && !task.isFinished else { return }
    if task.isReady {
      task.start()
    } else {
      taskQueue.addOperation(task)
    }
  }

  /// `main()`: starts the first task (sequential) or every task added so far (concurrent).
  func startGroup() {
    _ = addFinishObserver(self)
    launch(groupState.withLock { $0.start() })
  }

  /// The per-task completion of every started task, delivered by the job's router.
  func groupTaskFinished(_ task: Operation) {
    let error = (task as? ConcurrentOperation)?.error
    switch groupState.withLock({ $0.taskFinished(task, error: error) }) {
    case .launch(let launch):
      self.launch(launch)
    case .fail(let error):
      fail(error)
      stopGroup()
    }
  }

  /// After a cancel or a stop on failure: the waiting tasks finish without running.
  func stopGroup() {
    launch(groupState.withLock { $0.stop() })
  }

  /// `allTasksFinished()`: closes the group, or tracks a gate that keeps the job alive while a
  /// start is in flight or held tasks wait.
  func finishGroup() {
    switch groupState.withLock({ $0.allTasksFinished() }) {
    case .finish:
      break
    case .armGate:
      let gate = BlockOperation {}
      track(gate) { _ in }
      if groupState.withLock({ $0.gateTracked(gate) }) {
        gate.start()
      }
    }
  }

  /// Pauses or resumes starting tasks (see ``GroupState/Hold``).
  func setHeld(_ isHeld: Bool, generation: UInt64) {
    launch(groupState.withLock { $0.setHold(isHeld, generation: generation) })
  }

  func adoptContext(_ context: JobContext) {
    context.addMissingValues(from: groupState.withLock { $0.context })
    groupState.withLock { $0.context = context }
  }

  /// The job finished (any way): tasks still waiting finish without running.
  func operationDidFinish(_ operation: ConcurrentOperation) {
    launch(groupState.withLock { $0.jobFinished() })
  }
}
