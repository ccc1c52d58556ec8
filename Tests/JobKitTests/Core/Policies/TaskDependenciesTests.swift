import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task that records its start in a shared log, then finishes (failing with `failure`).
private final class DepStep: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `log` is thread-safe.
  let label: String
  let failure: (any Error)?
  let log: Locked<[String]>

  init(_ label: String, log: Locked<[String]>, failure: (any Error)? = nil) {
    self.label = label
    self.failure = failure
    self.log = log
    super.init()
    name = label
  }

  override func operationStart() {
    log.mutate { $0.append("start \(label)") }
    operationDone(error: failure)
  }
}

@Suite("JobController dependencies: trackAndQueue(_:after:)")
struct TaskDependenciesTests {
  /// A job whose `main()` runs `body`, its misuses kept quiet (they are checked in `misuses`).
  private func job(_ body: @escaping @Sendable (ScriptedJob) -> Void) -> ScriptedJob {
    let job = ScriptedJob(body)
    JobKitDiagnostics.setMisuseHandler({ _, _ in }, for: job)
    return job
  }

  @Test func aTaskStartsOnlyAfterItsDependencyWasRouted() async throws {
    let log = Locked<[String]>([])
    let first = TestTask("first")
    let job = job { job in
      job.trackAndQueue(first) { _ in log.mutate { $0.append("routed first") } }
      job.trackAndQueue(DepStep("second", log: log), after: [first]) { _ in log.mutate { $0.append("routed second") } }
    }
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    #expect(log.value.isEmpty)
    first.finish()
    #expect(await eventually { job.isFinished })
    #expect(log.value == ["routed first", "start second", "routed second"])
    #expect(job.misuses.isEmpty)
  }

  @Test func aDependencyMayBeTrackedAfterItsDependant() async throws {
    let log = Locked<[String]>([])
    let later = DepStep("later", log: log)
    let job = job { job in
      job.trackAndQueue(DepStep("dependant", log: log), after: [later]) { _ in }
      job.trackAndQueue(DepStep("other", log: log)) { _ in
        // Discovered while the graph runs: tracked from a callback.
        job.trackAndQueue(later) { _ in log.mutate { $0.append("routed later") } }
      }
    }
    try await job.run()
    let entries = log.value
    #expect(entries.firstIndex(of: "routed later")! < entries.firstIndex(of: "start dependant")!)
    #expect(job.misuses.isEmpty)
  }

  @Test func aFailedDependencySkipsItsDependantsTransitively() async throws {
    let log = Locked<[String]>([])
    let results = Locked<[String: Result<Int, any Error>]>([:])
    let broken = DepStep("broken", log: log, failure: TestError(1))
    let middle = Work { 1 }
    let job = job { job in
      job.trackAndQueue(broken) { _ in }
      job.trackAndQueue(resultOf: middle, after: [broken]) { result in results.mutate { $0["middle"] = result } }
      job.trackAndQueue(resultOf: Work { 2 }, after: [middle]) { result in results.mutate { $0["last"] = result } }
      job.trackAndQueue(resultOf: Work { 3 }, after: []) { result in results.mutate { $0["free"] = result } }
    }
    try await job.run()
    let outcome = results.value
    for name in ["middle", "last"] {
      guard case .failure(let error as JobKitError)? = outcome[name] else {
        Issue.record("\(name) was not skipped: \(String(describing: outcome[name]))")
        continue
      }
      #expect(error.code == .dependencyFailed)
    }
    if case .failure(let error as JobKitError)? = outcome["middle"] {
      #expect(error.description.contains("'broken'"))
    }
    if case .failure(let error as JobKitError)? = outcome["last"] {
      #expect(error.description.contains("Work<Int>"))
    }
    #expect(try outcome["free"]?.get() == 3)
    #expect(middle.isCancelled && middle.isFinished)
    #expect(log.value == ["start broken"])
    // The failure counts once, for the task that failed; skipped tasks are cancelled, not failed.
    #expect(job.failures.count == 1)
  }

  @Test func aCancelledPlainDependencySkipsAPlainDependant() async throws {
    let cancelled = BlockOperation {}
    cancelled.cancel()
    let ran = Locked(false)
    let dependant = BlockOperation { ran.mutate { $0 = true } }
    let finished = Locked<Bool?>(nil)
    let job = job { job in
      job.trackAndQueue(cancelled) { _ in }
      job.trackAndQueue(dependant, after: [cancelled]) { task in finished.mutate { $0 = task.isCancelled } }
    }
    try await job.run()
    #expect(!ran.value)
    #expect(finished.value == true)
  }

  @Test func aDependencyNeverTrackedIsGivenUpOnAndReported() async throws {
    let log = Locked<[String]>([])
    let orphan = DepStep("orphan", log: log)
    let result = Locked<Result<Int, any Error>?>(nil)
    let job = job { job in
      job.trackAndQueue(resultOf: Work { 1 }, after: [orphan]) { outcome in result.mutate { $0 = outcome } }
    }
    try await job.run()
    guard case .failure(let error as JobKitError)? = result.value else {
      Issue.record("not skipped: \(String(describing: result.value))")
      return
    }
    #expect(error.code == .dependencyFailed)
    #expect(job.misuses.map(\.code) == [.dependencyNeverTracked])
    #expect(job.misuses.first?.message.contains("'orphan'") == true)
    #expect(log.value.isEmpty)
  }

  @Test func aCycleIsGivenUpOnAndReported() async throws {
    let log = Locked<[String]>([])
    let first = DepStep("first", log: log)
    let second = DepStep("second", log: log)
    let routed = Locked(0)
    let job = job { job in
      job.trackAndQueue(first, after: [second]) { _ in routed.mutate { $0 += 1 } }
      job.trackAndQueue(second, after: [first]) { _ in routed.mutate { $0 += 1 } }
    }
    try await job.run()
    #expect(routed.value == 2)
    #expect(log.value.isEmpty)
    #expect(first.isCancelled && second.isCancelled)
    #expect(job.misuses.map(\.code) == [.dependencyNeverTracked, .dependencyNeverTracked])
  }

  @Test func aLimitCountsATaskOnlyOnceItIsQueued() async throws {
    let blocker = TestTask("blocker")
    let running = Locked<(now: Int, max: Int, order: [Int])>((0, 0, []))
    let job = job { job in
      job.setMaxConcurrentTasks(1, forGroup: GatedTask.self)
      job.trackAndQueue(blocker) { _ in }
      // Waits for the blocker: it must not hold the group's only slot meanwhile.
      job.trackAndQueue(GatedTask(0, running: running), after: [blocker]) { _ in }
      job.trackAndQueue(GatedTask(1, running: running)) { _ in }
    }
    job.startJob()
    #expect(await blocker.startedLatch.waitOpen())
    // The free task runs although its group's other task was tracked first.
    #expect(await eventually { running.value.order == [1] })
    blocker.finish()
    #expect(await eventually { job.isFinished })
    #expect(running.value.order == [1, 0] && running.value.max == 1)
  }

  @Test func trackAfterHoldsBackATaskTheCallerQueues() async throws {
    let log = Locked<[String]>([])
    let first = TestTask("first")
    let queue = OperationQueue()
    let second = DepStep("second", log: log)
    let job = job { job in
      job.trackAndQueue(first) { _ in log.mutate { $0.append("routed first") } }
      job.track(second, after: [first]) { _ in log.mutate { $0.append("routed second") } }
      queue.addOperation(second)
    }
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    first.finish()
    #expect(await eventually { job.isFinished })
    #expect(log.value == ["routed first", "start second", "routed second"])
  }

  @Test func aCancelledJobWithWaitingTasksFinishes() async throws {
    let first = TestTask("first", finishesOnCancel: true)
    let log = Locked<[String]>([])
    let job = job { job in
      job.trackAndQueue(first) { _ in }
      job.trackAndQueue(DepStep("second", log: log), after: [first]) { _ in }
      job.trackAndQueue(DepStep("third", log: log), after: [BlockOperation()]) { _ in }
    }
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    job.cancel()
    #expect(await eventually { job.isFinished })
    #expect(log.value.isEmpty)
  }

  @Test func aLimitForAGroupThatTrackedNothingIsReported() async throws {
    let job = job { job in
      job.setMaxConcurrentTasks(2, forGroup: Work<String>.self)
      job.setMaxConcurrentTasks(2, forGroup: Work<Int>.self)
      job.trackAndQueue(resultOf: Work { 1 }) { _ in }
    }
    try await job.run()
    #expect(job.misuses.map(\.code) == [.limitNeverUsed])
    #expect(job.misuses.first?.message.contains("Work<String>") == true)
  }

  /// Another job queues the task (its queue is suspended, so the task waits there unstarted):
  /// released, it must not be added to a queue a second time (a fatal error in Foundation).
  @Test func aTaskAnotherJobQueuesIsNotQueuedAgainWhenReleased() async throws {
    let otherQueue = OperationQueue()
    otherQueue.isSuspended = true
    let shared = BlockOperation {}
    let other = ScriptedJob(taskQueue: otherQueue) { job in job.trackAndQueue(shared) }
    other.startJob()
    #expect(await eventually { otherQueue.operationCount == 1 })
    let first = TestTask("first")
    let routed = Locked(0)
    let firstRouted = Locked(false)
    let job = job { job in
      job.trackAndQueue(first) { _ in firstRouted.mutate { $0 = true } }
      job.trackAndQueue(shared, after: [first]) { _ in routed.mutate { $0 += 1 } }
    }
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    first.finish()
    // Released as `first` is routed; `shared` still waits, unstarted, in the suspended queue.
    #expect(await eventually { firstRouted.value })
    otherQueue.isSuspended = false
    #expect(await eventually { job.isFinished && other.isFinished })
    #expect(routed.value == 1)
    #expect(job.misuses.map(\.code) == [.taskAlreadyQueued])
  }
}
