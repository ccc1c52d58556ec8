import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// `suspend()` / `resume()` on groups, pipelines and the command queue (issue 20, item 2),
/// modelled on CompositeOperations' composite specs: "Suspends composite operation and all
/// suboperations" (`COCompositeSerialOperationTests`) and the concurrent composite suspended from
/// a sub-operation, then resumed (`COCompositeOperationConcurrentTests`).
@Suite("Suspend: groups, pipelines and the command queue", .timeLimit(.minutes(2)))
struct SuspendCompositionTests {
  private func makeGroup(sequential: Bool, _ tasks: [Operation]) -> GroupJob {
    sequential ? SequentialGroup(tasks) : ConcurrentGroup(tasks)
  }

  /// Whether `task` is held back by its suspended group: handed out (the group lists it as
  /// started), neither queued nor started.
  private func isHeldBack(_ task: ManualTask, by group: GroupJob) -> Bool {
    group.runningTasks.contains(task) && !group.taskQueue.operations.contains(task) && !task.didStart
  }

  // MARK: Groups

  @Test(arguments: [true, false])
  func aSuspendedGroupStartsNoNewTaskAndGoesOnAtTheResume(sequential: Bool) async {
    let first = ManualTask("first")
    let second = ManualTask("second")
    let group = makeGroup(sequential: sequential, [first])
    group.startJob()
    #expect(await first.startedLatch.opened())
    group.suspend()
    #expect(group.isSuspended && first.isSuspended)
    // Sequential: `second` waits behind `first`; concurrent: it would start at once.
    group.add(second)
    first.finish()  // running tasks go on and are routed
    #expect(await eventually { !group.tasks.contains(first) && group.runningTasks.contains(second) })
    #expect(isHeldBack(second, by: group) && !group.isFinished)
    group.resume()
    #expect(await second.startedLatch.opened())
    second.finish()
    #expect(await group.finishedSoon())
    #expect(group.error == nil && !group.isCancelled)
  }

  @Test(arguments: [true, false])
  func aGroupSuspendedBeforeItStartsRunsNothingUntilTheResume(sequential: Bool) async {
    let task = ManualTask("task")
    let group = makeGroup(sequential: sequential, [task])
    group.suspend()
    group.startJob()
    #expect(await eventually { group.isExecuting })
    #expect(!task.didStart)
    group.resume()
    #expect(await task.startedLatch.opened())
    task.finish()
    #expect(await group.finishedSoon())
  }

  /// The migration article's promise: a suspended group's children are suspended too, the steps
  /// still waiting for their turn included (and a task added while it is suspended); the resume
  /// resumes them, and they run in order.
  @Test(arguments: [true, false])
  func aSuspendedGroupsWaitingTasksAreSuspendedToo(sequential: Bool) async {
    let first = ManualTask("first")
    let waiting = (0..<3).map { ManualTask("waiting \($0)") }
    let group = makeGroup(sequential: sequential, [first] + waiting.prefix(2))
    group.startJob()
    #expect(await first.startedLatch.opened())
    group.suspend()
    group.add(waiting[2])
    #expect(first.isSuspended && waiting.allSatisfy(\.isSuspended))
    group.resume()
    #expect(!first.isSuspended && waiting.allSatisfy { !$0.isSuspended })
    first.finish()
    for task in waiting {
      #expect(await task.startedLatch.opened())
      task.finish()
    }
    #expect(await group.finishedSoon())
    #expect(group.error == nil && !group.isCancelled)
  }

  @Test func suspendingAGroupSuspendsItsNestedGroupsAndTheirTasks() async {
    let inner = ManualTask("inner")
    let later = ManualTask("later")
    let child = SequentialGroup([inner, later])
    let parent = ConcurrentGroup([child])
    parent.startJob()
    #expect(await inner.startedLatch.opened())
    parent.suspend()
    #expect(child.isSuspended && inner.isSuspended)
    inner.finish()
    #expect(await eventually { child.runningTasks.contains(later) })
    #expect(isHeldBack(later, by: child))
    parent.resume()
    #expect(!child.isSuspended)
    #expect(await later.startedLatch.opened())
    later.finish()
    #expect(await parent.finishedSoon())
  }

  @Test(arguments: [true, false])
  func cancelWhileSuspendedFinishesTheGroupWithoutRunningTheWaitingTasks(sequential: Bool) async {
    let first = ManualTask("first")
    let waiting = (0..<4).map { ManualTask("waiting \($0)") }
    let group = makeGroup(sequential: sequential, [first])
    let cancelled = Latch()
    group.onCancelled = { cancelled.open() }
    group.startJob()
    #expect(await first.startedLatch.opened())
    group.suspend()
    for task in waiting { group.add(task) }
    group.cancel()
    #expect(await group.finishedSoon())
    #expect(cancelled.opened && group.isCancelled && !group.isSuspended)
    #expect(waiting.allSatisfy { $0.isFinished && !$0.didStart })
  }

  @Test(arguments: [false, true])
  func suspendDoesNothingOnAFinishedOrCancelledGroup(cancelled: Bool) async {
    let group = ConcurrentGroup([InstantTask()])
    if cancelled {
      group.cancel()
    } else {
      group.startJob()
      #expect(await group.finishedSoon())
    }
    group.suspend()
    #expect(!group.isSuspended)
  }

  /// The command queue's hold (`setHeld`, its pause) and a suspension compose: a task starts only
  /// once both are released, in either order.
  @Test(arguments: [true, false])
  func aHoldAndASuspensionMustBothBeReleased(holdReleasedFirst: Bool) async {
    let running = ManualTask("running")
    let task = ManualTask("task")
    let group = ConcurrentGroup([running])
    group.startJob()
    #expect(await running.startedLatch.opened())
    group.setHeld(true, generation: 1)
    group.suspend()
    group.add(task)
    if holdReleasedFirst {
      group.setHeld(false, generation: 2)
      #expect(await eventually { group.runningTasks.contains(task) })
      #expect(isHeldBack(task, by: group))  // still suspended
      group.resume()
    } else {
      group.resume()
      #expect(!group.runningTasks.contains(task) && !task.didStart)  // still held
      group.setHeld(false, generation: 2)
    }
    #expect(await task.startedLatch.opened())
    task.finish()
    running.finish()
    #expect(await group.finishedSoon())
  }

  // MARK: CommandQueue

  @Test func suspendIsTheCommandQueuesPause() async {
    let queue = CommandQueue(mode: .concurrent)
    queue.suspend()
    #expect(queue.isSuspended && queue.isPaused)
    let command = ManualTask("command")
    queue.add(command)
    #expect(queue.commands.contains(command) && !command.didStart)
    queue.resume()
    #expect(!queue.isSuspended)
    #expect(await command.startedLatch.opened())
    command.finish()
    await queue.drained()
  }

  // MARK: Pipeline

  /// Whether the pipeline's Swift task waits for the resume at a checkpoint.
  private func waitsAtCheckpoint(_ pipeline: ConcurrentOperation) -> Bool {
    pipeline.state.withLock { $0.suspension.waiters.hasRegistered }
  }

  @Test func aSuspendedPipelineStartsNoNextStepUntilTheResume() async throws {
    let inFirst = Latch()
    let release = Latch()
    let log = EventLog()
    let pipeline = Pipeline.start { () async -> Int in
      inFirst.open()
      _ = await release.waitOpen()
      log.record("first")
      return 1
    }.then { value in
      log.record("second")
      return value + 1
    }
    let outcome = Task { try await pipeline.run() }
    #expect(await inFirst.opened())
    pipeline.suspend()
    release.open()  // the running step goes on
    #expect(await eventually { waitsAtCheckpoint(pipeline) })
    #expect(log.all == ["first"])
    pipeline.resume()
    #expect(try await outcome.value == 2)
    #expect(log.all == ["first", "second"])
  }

  @Test func cancelWhileAPipelineWaitsForTheResumeEndsItCancelled() async {
    let cancelled = Latch()
    let second = Latch()
    let pipeline = Pipeline.start { 1 }.then { value in
      second.open()
      return value
    }.onCancelled { cancelled.open() }
    pipeline.suspend()
    pipeline.name = "suspended"
    JobController.sharedJobQueue.addOperation(pipeline)
    // Suspended before its queue started it: nothing runs until the resume, or a cancel.
    #expect(await eventually { pipeline.isExecuting })
    pipeline.cancel()
    #expect(await pipeline.finishedSoon())
    #expect(cancelled.opened && !second.opened && pipeline.isCancelled)
  }

  @Test func cancelAtACheckpointEndsThePipelineCancelled() async {
    let inFirst = Latch()
    let release = Latch()
    let cancelled = Latch()
    let pipeline = Pipeline.start { () async -> Int in
      inFirst.open()
      _ = await release.waitOpen()
      return 1
    }.then { $0 + 1 }.onCancelled { cancelled.open() }
    JobController.sharedJobQueue.addOperation(pipeline)
    #expect(await inFirst.opened())
    pipeline.suspend()
    release.open()
    #expect(await eventually { waitsAtCheckpoint(pipeline) })
    pipeline.cancel()
    #expect(await pipeline.finishedSoon())
    #expect(cancelled.opened && pipeline.result == nil)
  }
}
