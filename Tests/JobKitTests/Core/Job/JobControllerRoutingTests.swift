import Foundation
import JobKitTesting
import Testing

@testable import JobKit

// Tasks of distinct dynamic types, so each forms its own group.
final class TaskA: ConcurrentOperation, @unchecked Sendable {
  override func operationStart() { DispatchQueue.global().async { self.operationDone() } }
}
final class TaskB: ConcurrentOperation, @unchecked Sendable {
  override func operationStart() { DispatchQueue.global().async { self.operationDone() } }
}
final class TaskC: ConcurrentOperation, @unchecked Sendable {
  let index: Int
  init(_ index: Int) { self.index = index }
  override func operationStart() { DispatchQueue.global().async { self.operationDone() } }
}
final class TaskD: ConcurrentOperation, @unchecked Sendable {
  override func operationStart() { DispatchQueue.global().async { self.operationDone() } }
}

/// DHJobController's example job: A -> B -> 25 x C (each with its own completion, then one group
/// completion) -> D. C tasks are tracked by the job and queued on the job's own serial queue.
final class ExampleJob: JobController, @unchecked Sendable {
  let log = EventLog()
  let serialQueue: OperationQueue = {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    return queue
  }()

  override func main() {
    log.record("main")
    trackAndQueue(TaskA()) { [unowned self] _ in
      log.record("A")
      trackAndQueue(TaskB()) { [unowned self] _ in
        log.record("B")
        setCompletion(forGroup: TaskC.self) { [unowned self] in
          log.record("all C")
          trackAndQueue(TaskD()) { [unowned self] _ in log.record("D") }
        }
        for index in 0..<25 {
          let task = TaskC(index)
          track(task) { [unowned self] task in log.record("C\(task.index)") }
          serialQueue.addOperation(task)
        }
      }
    }
  }

  override func taskFinished(_ task: Operation) { log.record("taskFinished \(type(of: task))") }
  override func taskGroupFinished(_ group: Operation.Type) { log.record("group \(group)") }
  override func allTasksFinished() { log.record("allTasksFinished") }
}

@Suite("JobController routing")
struct JobControllerRoutingTests {
  /// The 25 C completions are routed in the order the C finishes reached the job, which is not
  /// their queue order: a C task's `operationDone` frees the serial queue's slot before it tells
  /// the job, so the next C can start, finish and be routed first. Only their set is fixed.
  @Test func dhExampleJobRunsInTheExactOrder() async throws {
    let job = ExampleJob()
    try await job.run()
    let log = job.log.all
    let before = ["main", "A", "group TaskA", "B", "group TaskB"]
    let after = ["all C", "D", "group TaskD", "allTasksFinished"]
    #expect(log.count == before.count + 25 + after.count)
    #expect(Array(log.prefix(before.count)) == before)
    #expect(Array(log.suffix(after.count)) == after)
    let completions = log.dropFirst(before.count).dropLast(after.count)
    #expect(completions.sorted() == (0..<25).map { "C\($0)" }.sorted())
    #expect(job.isFinished && job.error == nil && job.misuses.isEmpty)
  }

  @Test func theRecorderCapturesTheExampleJobsCallbackOrder() async throws {
    let job = ExampleJob()
    let recorder = JobRecorder(job)
    job.startJob()
    let order = await recorder.finished()
    let expected =
      ["started", "taskFinished TaskA", "groupFinished TaskA", "taskFinished TaskB", "groupFinished TaskB"]
      + Array(repeating: "taskFinished TaskC", count: 25)
      + ["groupFinished TaskC", "taskFinished TaskD", "groupFinished TaskD", "allTasksFinished", "finished"]
    #expect(order == expected)
  }

  /// The tasks are queued only after `main()`'s last `track` call, so no callback is routed
  /// inside `main()` and every callback runs after it returned, where a group callback follows
  /// its last task's own callback at once. (With `trackAndQueue`, A and B could both finish
  /// before `trackAndQueue(b)` routed: both completions would run inside `main()`, and both group
  /// callbacks, deferred until it returned, after them.)
  @Test func perTaskCompletionReplacesTaskFinishedAndGroupHandlerReplacesTaskGroupFinished() async throws {
    final class Job: JobController, @unchecked Sendable {
      let log = EventLog()
      override func main() {
        setCompletion(forGroup: TaskB.self) { [unowned self] in log.record("B handler") }
        let a = TaskA()
        let b = TaskB()
        track(a) { [unowned self] _ in log.record("A completion") }
        track(b)
        taskQueue.addOperation(a)
        taskQueue.addOperation(b)
      }
      override func taskFinished(_ task: Operation) { log.record("taskFinished \(type(of: task))") }
      override func taskGroupFinished(_ group: Operation.Type) { log.record("group \(group)") }
      override func allTasksFinished() { log.record("all") }
    }
    let job = Job()
    try await job.run()
    let log = job.log.all
    #expect(log.contains("A completion") && !log.contains("taskFinished TaskA"))
    #expect(log.contains("taskFinished TaskB") && log.contains("B handler") && !log.contains("group TaskB"))
    #expect(log.contains("group TaskA"))
    #expect(log.last == "all")
    // Each group callback comes right after its last task's own callback.
    #expect(log.firstIndex(of: "group TaskA")! == log.firstIndex(of: "A completion")! + 1)
    #expect(log.firstIndex(of: "B handler")! == log.firstIndex(of: "taskFinished TaskB")! + 1)
  }

  @Test func groupFiresAfterItsLastTaskAndAgainWhenRefilled() async throws {
    final class Job: JobController, @unchecked Sendable {
      let log = EventLog()
      var rounds = 0
      override func main() { trackRound() }
      func trackRound() {
        rounds += 1
        for index in 0..<5 { trackAndQueue(TaskC(index)) }
      }
      override func taskFinished(_ task: Operation) { log.record("C") }
      override func taskGroupFinished(_ group: Operation.Type) {
        log.record("group")
        if rounds < 3 { trackRound() }
      }
      override func allTasksFinished() { log.record("all") }
    }
    let job = Job()
    try await job.run()
    let round = Array(repeating: "C", count: 5) + ["group"]
    #expect(job.log.all == round + round + round + ["all"])
  }

  @Test func jobWhoseMainTracksNothingFinishesAfterAllTasksFinished() async throws {
    final class Job: JobController, @unchecked Sendable {
      let log = EventLog()
      override func main() { log.record("main") }
      override func allTasksFinished() { log.record("all \(isFinished)") }
    }
    let job = Job()
    try await job.run()
    #expect(job.log.all == ["main", "all false"])
  }

  @Test func allTasksFinishedThatTracksMoreKeepsTheJobAlive() async throws {
    final class Job: JobController, @unchecked Sendable {
      let log = EventLog()
      var waves = 0
      override func main() { trackAndQueue(TaskA()) }
      override func allTasksFinished() {
        waves += 1
        log.record("all \(waves)")
        if waves < 3 { trackAndQueue(TaskA()) }
      }
    }
    let job = Job()
    try await job.run()
    #expect(job.log.all == ["all 1", "all 2", "all 3"])
  }

  /// Invariant: `main()` and the callbacks never run on two threads at once; group callbacks and
  /// `allTasksFinished()` never run before `main()` returned; per-task callbacks delivered while
  /// `main()` runs are delivered on `main()`'s own thread, inside its `track` calls.
  @Test func callbacksNeverRunConcurrentlyAndGroupCallbacksWaitForMain() async throws {
    final class Job: JobController, @unchecked Sendable {
      /// (depth, thread) of the code currently inside main() or a callback.
      let inside = Locked<(depth: Int, thread: UInt)>((0, 0))
      let concurrentEntries = Locked(0)
      var mainThread: UInt = 0
      var mainRunning = false
      var callbacks = 0
      var perTaskDuringMainOffMainThread = 0
      var groupOrAllDuringMain = 0
      func enter() {
        let thread = currentThreadID()
        inside.mutate {
          if $0.depth > 0 && $0.thread != thread { concurrentEntries.mutate { $0 += 1 } }
          $0 = ($0.depth + 1, thread)
        }
      }
      func leave() { inside.mutate { $0.depth -= 1 } }
      override func main() {
        enter()
        mainThread = currentThreadID()
        mainRunning = true
        for index in 0..<2_000 { trackAndQueue(TaskC(index)) }
        mainRunning = false
        leave()
      }
      override func taskFinished(_ task: Operation) {
        enter()
        callbacks += 1
        if mainRunning && currentThreadID() != mainThread { perTaskDuringMainOffMainThread += 1 }
        leave()
      }
      override func taskGroupFinished(_ group: Operation.Type) {
        enter()
        if mainRunning { groupOrAllDuringMain += 1 }
        leave()
      }
      override func allTasksFinished() {
        enter()
        if mainRunning { groupOrAllDuringMain += 1 }
        leave()
      }
    }
    let job = Job()
    try await job.run()
    #expect(job.concurrentEntries.value == 0)
    #expect(job.callbacks == 2_000)
    #expect(job.perTaskDuringMainOffMainThread == 0)
    #expect(job.groupOrAllDuringMain == 0)
  }

  /// The DHJobController race: tasks finishing while `main()` still tracks must not let the job
  /// (or a group) finish early. 10,000 tasks that finish at once.
  @Test func mainTrackingTenThousandInstantTasksSeesAllOfThem() async throws {
    final class Job: JobController, @unchecked Sendable {
      var finished = 0
      var groups = 0
      var allCalls = 0
      var finishedWhenAllCalled = -1
      override func main() {
        for index in 0..<10_000 { trackAndQueue(InstantTask("\(index)")) }
      }
      override func taskFinished(_ task: Operation) { finished += 1 }
      override func taskGroupFinished(_ group: Operation.Type) { groups += 1 }
      override func allTasksFinished() {
        allCalls += 1
        finishedWhenAllCalled = finished
      }
    }
    let job = Job()
    try await job.run()
    #expect(job.finished == 10_000)
    #expect(job.groups == 1)
    #expect(job.allCalls == 1)
    #expect(job.finishedWhenAllCalled == 10_000)
  }

  @Test func plainOperationsAreRoutedAndKeepTheirOwnCompletionBlock() async throws {
    final class Job: JobController, @unchecked Sendable {
      let log = EventLog()
      let own = Latch()
      var task: BlockOperation?
      override func main() {
        let task = BlockOperation { self.log.record("block") }
        task.completionBlock = { [own] in own.open() }
        self.task = task
        trackAndQueue(task) { [unowned self] _ in log.record("completion") }
      }
      override func taskGroupFinished(_ group: Operation.Type) { log.record("group \(group)") }
    }
    let job = Job()
    try await job.run()
    #expect(await job.own.waitOpen())
    #expect(job.log.all == ["block", "completion", "group BlockOperation"])
    #expect(job.task?.completionBlock != nil)  // the task's own block was put back
  }

  @Test func trackWithTheCallersOwnQueue() async throws {
    final class Job: JobController, @unchecked Sendable {
      let other = OperationQueue()
      var seen: [Int] = []
      override func main() {
        for index in 0..<50 {
          let task = TaskC(index)
          track(task) { [unowned self] task in seen.append(task.index) }
          other.addOperation(task)
        }
      }
    }
    let job = Job()
    try await job.run()
    #expect(job.seen.sorted() == Array(0..<50))
  }

  @Test func jobsWorkWithAnySuppliedQueueAndAsDependencies() async throws {
    final class Job: JobController, @unchecked Sendable {
      override func main() { for index in 0..<20 { trackAndQueue(TaskC(index)) } }
    }
    let serial = OperationQueue()
    serial.maxConcurrentOperationCount = 1
    let job = Job(taskQueue: serial)
    let log = EventLog()
    let after = BlockOperation { log.record("after \(job.isFinished)") }
    after.addDependency(job)
    let completion = Latch()
    job.completionBlock = { completion.open() }
    let jobs = OperationQueue()
    jobs.maxConcurrentOperationCount = 1
    jobs.addOperation(after)
    job.startJob(on: jobs)
    #expect(await job.finishedSoon())
    #expect(await completion.waitOpen())
    #expect(await after.finishedSoon())
    #expect(log.all == ["after true"])
    job.completionBlock = nil
  }
}
