import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// The label of the dispatch queue the calling code runs on (libdispatch's C function; not
/// imported into Swift on Linux).
@_silgen_name("dispatch_queue_get_label")
private func dispatchQueueLabel(_ queue: OpaquePointer?) -> UnsafePointer<CChar>

private func currentDispatchQueueLabel() -> String { String(cString: dispatchQueueLabel(nil)) }

/// What a task saw of its queue while it ran.
private struct Sighting: Sendable {
  let current: OperationQueue?
  let label: String
  let inOperations: Bool
}

/// A job whose `main()` runs a closure; it never reads the public `taskQueue` itself.
private final class BodyJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `body` is immutable.
  let body: @Sendable (BodyJob) -> Void
  init(taskQueue: OperationQueue? = nil, _ body: @escaping @Sendable (BodyJob) -> Void) {
    self.body = body
    if let taskQueue { super.init(taskQueue: taskQueue) } else { super.init() }
  }
  override func main() { body(self) }
}

/// A job of JobKit's own operations on the queue it made for itself starts them itself while
/// nobody has read `taskQueue` (see `OwnQueueFlag`); each test checks that what a user can
/// observe of those tasks is kept, and that the first read of `taskQueue` switches to the queue.
@Suite("Private task queue")
struct OwnQueueFlagTests {
  /// A `BlockTask` that records what it sees of its job's queue (`queue`, read by JobKit's own
  /// accessor so as not to hand it out).
  private static func sightingTask(
    _ queue: OperationQueue, into box: Locked<[Sighting]>, then body: @escaping @Sendable () -> Void = {}
  ) -> BlockTask {
    return BlockTask {
      let current = OperationQueue.current
      box.mutate {
        $0.append(
          Sighting(
            current: current, label: currentDispatchQueueLabel(),
            inOperations: !queue.operations.isEmpty))
      }
      body()
    }
  }

  /// `count` tasks ran, each as an operation of `queue` (its `current`, in its `operations`) on
  /// its dispatch queue `label`.
  private static func expectEachRan(_ seen: [Sighting], count: Int, through queue: OperationQueue, label: String) {
    #expect(seen.count == count)
    for sighting in seen {
      #expect(sighting.current === queue)
      #expect(sighting.label == label)
      #expect(sighting.inOperations)
    }
  }

  @Test func jobKitsOwnTasksSkipTheQueueNobodyHasSeen() async throws {
    let seen = Locked<[Sighting]>([])
    let job = BodyJob { job in
      for _ in 0..<20 {
        job.trackAndQueue(Self.sightingTask(job.queueOfTasks, into: seen))
      }
    }
    try await job.run()
    #expect(seen.value.count == 20)
    for sighting in seen.value {
      #expect(sighting.current == nil)
      // libdispatch's global queue of the task's class (`.default`), in the pool of threads
      // where the job's own queue would run it.
      #expect(sighting.label == DispatchQueue.global().label)
      #expect(!sighting.inOperations)
    }
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  @Test func readingTaskQueueFirstSendsEveryTaskThroughIt() async throws {
    let seen = Locked<[Sighting]>([])
    let job = BodyJob { job in
      for _ in 0..<20 {
        job.trackAndQueue(Self.sightingTask(job.queueOfTasks, into: seen))
      }
    }
    let queue = job.taskQueue
    try await job.run()
    Self.expectEachRan(seen.value, count: 20, through: queue, label: "JobKit.JobController.taskQueue")
  }

  /// The hand-out in the middle of a run: the task that runs already stays out of `operations`;
  /// every task queued after the read goes through the queue (and a suspension of the queue
  /// holds it back).
  @Test func aHandOutMidRunSwitchesLaterTasksToTheQueue() async throws {
    let seen = Locked<[Sighting]>([])
    let firstInside = Latch()
    let releaseFirst = Latch()
    // Asynchronous bodies: a task that waits holds no thread (the suites beside this one need
    // them).
    let first = BlockTask(async: {
      firstInside.open()
      _ = await releaseFirst.waitOpen()
    })
    let later = BlockTask {
      seen.mutate {
        $0.append(Sighting(current: OperationQueue.current, label: currentDispatchQueueLabel(), inOperations: true))
      }
    }
    let job = BodyJob { job in job.trackAndQueue(first) }
    job.startJob()
    #expect(await firstInside.waitOpen())
    let queue = job.taskQueue
    #expect(!queue.operations.contains(first))
    queue.isSuspended = true
    job.trackAndQueue(later)
    #expect(queue.operations.contains(later))
    #expect(!later.isExecuting && !later.isFinished)
    queue.isSuspended = false
    releaseFirst.open()
    #expect(await eventually { job.isFinished })
    #expect(seen.value.count == 1)
    #expect(seen.value.first?.current === queue)
  }

  /// A plain `Operation` goes through the queue, whose code can read `OperationQueue.current`:
  /// from then on the job's own operations go through it too.
  @Test func aPlainOperationExposesTheQueue() async throws {
    let seen = Locked<[Sighting]>([])
    let job = BodyJob { job in
      // Exposed as it is added, before it runs.
      job.trackAndQueue(BlockOperation {})
      job.trackAndQueue(Self.sightingTask(job.queueOfTasks, into: seen))
    }
    try await job.run()
    #expect(job.ownQueueFlag?.isExposed == true)
    #expect(seen.value.count == 1)
    #expect(seen.value.first?.current === job.queueOfTasks)
  }

  /// A user's own queue: every task goes through it, as always.
  @Test func aUsersQueueSeesEveryTask() async throws {
    let seen = Locked<[Sighting]>([])
    let queue = OperationQueue()
    queue.name = "users-queue"
    let job = BodyJob(taskQueue: queue) { job in
      for _ in 0..<10 {
        job.trackAndQueue(Self.sightingTask(queue, into: seen))
      }
    }
    #expect(job.ownQueueFlag == nil)
    try await job.run()
    Self.expectEachRan(seen.value, count: 10, through: queue, label: "users-queue")
  }

  /// A task with a Foundation dependency is not ready: it goes to the queue, which starts it once
  /// its dependency finished.
  @Test func aTaskThatIsNotReadyWaitsForItsDependency() async throws {
    let log = EventLog()
    let gate = BlockOperation { log.record("dependency") }
    let task = BlockTask { log.record("task") }
    task.addDependency(gate)
    let job = BodyJob { job in job.trackAndQueue(task) }
    job.startJob()
    #expect(await eventually { job.ownQueueFlag?.isExposed == true })
    #expect(!task.isExecuting && !task.isFinished)
    OperationQueue().addOperation(gate)
    #expect(await eventually { job.isFinished })
    #expect(log.all == ["dependency", "task"])
  }

  /// Dependencies between a job's tasks (`trackAndQueue(_:after:completion:)`) keep their order.
  @Test func jobDependenciesKeepTheirOrder() async throws {
    let log = EventLog()
    let job = BodyJob { job in
      let first = BlockTask { log.record("first") }
      let second = BlockTask { log.record("second") }
      let third = BlockTask { log.record("third") }
      job.trackAndQueue(third, after: [second]) { _ in }
      job.trackAndQueue(second, after: [first]) { _ in }
      job.trackAndQueue(first) { _ in }
    }
    try await job.run()
    #expect(log.all == ["first", "second", "third"])
    #expect(job.ownQueueFlag?.isExposed == false)
  }

  /// A task's `qualityOfService` picks libdispatch's global queue of that class, as
  /// `OperationQueue` runs the operation's work item with it; set before it is tracked, it is
  /// read from the task's own state.
  @Test func qualityOfServicePicksTheQueueOfItsClass() async throws {
    let labels = Locked<[String]>([])
    let job = BodyJob { job in
      for qos in [QualityOfService.utility, .background, .userInitiated] {
        let task = BlockTask { labels.mutate { $0.append(currentDispatchQueueLabel()) } }
        task.qualityOfService = qos
        task.queuePriority = .veryHigh
        job.trackAndQueue(task)
      }
    }
    try await job.run()
    let expected = [DispatchQoS.QoSClass.utility, .background, .userInitiated].map {
      DispatchQueue.global(qos: $0).label
    }
    #expect(Set(labels.value) == Set(expected))
    #expect(Set(expected).count == 3)
  }

  /// Cancelled before it started, a task finishes without running its body; the job's cancel
  /// cancels the rest.
  @Test func cancellationIsKept() async throws {
    let ran = Locked(0)
    let running = Latch()
    let hold = BlockTask(async: {
      running.open()
      try await suspendUntilCancelled()
    })
    let cancelledFirst = BlockTask { ran.mutate { $0 += 1 } }
    cancelledFirst.cancel()
    let job = BodyJob { job in
      job.trackAndQueue(cancelledFirst)
      job.trackAndQueue(hold)
    }
    job.startJob()
    #expect(await running.waitOpen())
    job.cancel()
    #expect(await eventually { job.isFinished })
    #expect(ran.value == 0)
    #expect(cancelledFirst.isFinished && cancelledFirst.isCancelled)
    #expect(hold.isFinished && hold.isCancelled)
  }

  /// What Foundation drives from a task's `isFinished` change: `completionBlock`,
  /// `waitUntilFinished()` and a dependent operation on another queue.
  @Test func finishNotificationsReachTheTasksObservers() async throws {
    let release = Latch()
    let completion = Latch()
    let log = EventLog()
    let task = BlockTask(async: {
      _ = await release.waitOpen()
      log.record("task")
    })
    task.completionBlock = { completion.open() }
    let dependent = BlockOperation { log.record("dependent") }
    dependent.addDependency(task)
    let other = OperationQueue()
    other.addOperation(dependent)
    let job = BodyJob { job in job.trackAndQueue(task) }
    job.startJob()
    #expect(await eventually { task.isExecuting })
    #expect(!dependent.isFinished)
    // `waitUntilFinished()` blocks: on a thread of its own, not one of the test's.
    let waited = Latch()
    Thread {
      task.waitUntilFinished()
      waited.open()
    }.start()
    release.open()
    #expect(await waited.waitOpen())
    #expect(await eventually { dependent.isFinished })
    #expect(await completion.waitOpen())
    #expect(log.all == ["task", "dependent"])
    #expect(await eventually { job.isFinished })
  }

  /// A per-type limit holds back the tasks the job starts itself.
  @Test func aLimitIsKept() async throws {
    let running = Locked(0)
    let peak = Locked(0)
    let go = Latch()
    let job = BodyJob { job in
      job.setMaxConcurrentTasks(2, forGroup: BlockTask.self)
      for _ in 0..<20 {
        job.trackAndQueue(
          BlockTask(async: {
            let now = running.mutate {
              $0 += 1
              return $0
            }
            peak.mutate { $0 = max($0, now) }
            _ = await go.waitOpen()
            running.mutate { $0 -= 1 }
          }))
      }
    }
    job.startJob()
    #expect(await eventually { running.value == 2 })
    // A third task would start within this bounded wait if the limit were not kept.
    #expect(await !eventually(within: .milliseconds(300)) { running.value > 2 })
    go.open()
    #expect(await eventually { job.isFinished })
    #expect(peak.value == 2)
  }

  /// A suspended job holds back the tasks it would start itself, and starts them on resume.
  @Test func aSuspensionIsKept() async throws {
    let ran = Locked(0)
    let job = BodyJob { job in
      job.suspend()
      for _ in 0..<10 {
        job.trackAndQueue(BlockTask { ran.mutate { $0 += 1 } })
      }
    }
    job.startJob()
    #expect(await eventually { job.isSuspended && job.isExecuting })
    #expect(ran.value == 0)
    job.resume()
    #expect(await eventually { job.isFinished })
    #expect(ran.value == 10)
  }

  /// Nested jobs on their parents' private queues: each level starts the next itself.
  @Test func nestedJobsStartDirectly() async throws {
    let leaves = Locked(0)
    let currents = Locked<[OperationQueue?]>([])
    @Sendable func level(_ depth: Int) -> BodyJob {
      BodyJob { job in
        currents.mutate { $0.append(OperationQueue.current) }
        if depth == 0 {
          job.trackAndQueue(BlockTask { leaves.mutate { $0 += 1 } })
        } else {
          job.trackAndQueue(level(depth - 1))
          job.trackAndQueue(level(depth - 1))
        }
      }
    }
    let top = level(4)
    try await top.run()
    #expect(leaves.value == 16)
    // The top level runs on the shared job queue; every nested one was started directly.
    #expect(currents.value.filter { $0 == nil }.count == 30)
  }
}
