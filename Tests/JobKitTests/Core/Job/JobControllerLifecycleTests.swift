import Foundation
import Testing

@testable import JobKit

/// A job whose `main()` runs a closure, recording every routing callback.
final class ScriptedJob: JobController, @unchecked Sendable {
  let log = EventLog()
  let body: @Sendable (ScriptedJob) -> Void

  init(taskQueue: OperationQueue? = nil, _ body: @escaping @Sendable (ScriptedJob) -> Void) {
    self.body = body
    if let taskQueue { super.init(taskQueue: taskQueue) } else { super.init() }
  }

  override func main() { body(self) }
  override func taskFinished(_ task: Operation) { log.record("taskFinished") }
  override func taskGroupFinished(_ group: Operation.Type) { log.record("group") }
  override func allTasksFinished() { log.record("all") }
}

@Suite("JobController cancel, fail and finish")
struct JobControllerLifecycleTests {
  @Test func cancelCancelsTasksWaitsForThemAndRunsNoCallback() async throws {
    let stubborn = ManualTask("stubborn", finishesOnCancel: false)
    let cooperative = ManualTask("cooperative", finishesOnCancel: true)
    let job = ScriptedJob { job in
      job.trackAndQueue(stubborn)
      job.trackAndQueue(cooperative)
    }
    job.startJob()
    #expect(await stubborn.startedLatch.waitOpen())
    #expect(await cooperative.startedLatch.waitOpen())
    job.cancel()
    #expect(await cooperative.finishedSoon())
    #expect(stubborn.isCancelled && !job.isFinished)  // waits for the stubborn task
    stubborn.finish()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(job.isFinished && job.isCancelled && job.error == nil)
    #expect(job.log.all.isEmpty)
  }

  @Test func tasksTrackedAfterCancelAreCancelledAsTheyAreTracked() async throws {
    let later = ManualTask("later")
    let job = ScriptedJob { job in
      job.cancel()
      job.trackAndQueue(later)
    }
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(later.isCancelled && later.isFinished && !later.didStart)
    #expect(job.log.all.isEmpty)
  }

  @Test func failFinishesWithTheErrorAfterTasksFinished() async throws {
    let first = ManualTask("first", finishesOnCancel: false)
    let job = ScriptedJob { job in
      job.trackAndQueue(first)
      job.trackAndQueue(InstantTask()) { _ in job.fail(TestError(42)) }
    }
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    #expect(await first.cancelledLatch.waitOpen())  // fail(_:) cancelled the other task
    #expect(!job.isFinished)
    first.finish()
    await #expect(throws: TestError(42)) { try await job.run() }
    #expect(job.error as? TestError == TestError(42))
    #expect(!job.log.all.contains("all") && !job.log.all.contains("group"))
  }

  @Test func cancellingTheAwaitingTaskCancelsTheJob() async throws {
    let task = ManualTask()
    let job = ScriptedJob { $0.trackAndQueue(task) }
    let runner = Task { try await job.run() }
    #expect(await task.startedLatch.waitOpen())
    runner.cancel()
    await #expect(throws: CancellationError.self) { try await runner.value }
    #expect(job.isCancelled && job.isFinished && task.isCancelled && task.isFinished)
  }

  @Test func cancelBeforeStartSkipsMainButWaitsForTasksTrackedEarlier() async throws {
    let early = ManualTask("early", finishesOnCancel: false)
    let mainRan = Locked(false)
    let job = ScriptedJob { _ in mainRan.mutate { $0 = true } }
    job.track(early)  // tracked before the job started; the caller queues it
    OperationQueue().addOperation(early)
    #expect(await early.startedLatch.waitOpen())
    job.cancel()
    #expect(early.isCancelled)
    job.startJob()
    #expect(!(await job.finishedSoon(within: 0.2)))
    early.finish()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(!mainRan.value)
  }

  @Test func runStartsAJobOnlyOnceAndAwaitsIt() async throws {
    let job = ScriptedJob { $0.trackAndQueue(InstantTask()) }
    job.startJob()
    try await job.run()
    try await job.run()  // already finished: returns at once
    #expect(job.misuses.isEmpty)
    #expect(job.log.all == ["taskFinished", "group", "all"])
  }

  @Test func finishedMeansEveryTaskAndCallbackIsDone() async throws {
    let sawUnfinished = Locked(false)
    let tasks = (0..<100).map { InstantTask("\($0)") }
    let job = ScriptedJob { job in
      for task in tasks {
        job.trackAndQueue(task) { task in
          if !task.isFinished { sawUnfinished.mutate { $0 = true } }
        }
      }
    }
    let dependent = BlockOperation {
      if !tasks.allSatisfy({ $0.isFinished }) { sawUnfinished.mutate { $0 = true } }
    }
    dependent.addDependency(job)
    OperationQueue().addOperation(dependent)
    try await job.run()
    #expect(tasks.allSatisfy { $0.isFinished })
    #expect(await dependent.finishedSoon())
    #expect(!sawUnfinished.value)
  }
}
