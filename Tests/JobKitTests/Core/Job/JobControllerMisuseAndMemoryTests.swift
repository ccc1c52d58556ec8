import Foundation
import JobKitTesting
import Testing

@testable import JobKit

@Suite("JobController misuse and memory")
struct JobControllerMisuseAndMemoryTests {
  @Test func trackingATaskTwiceKeepsTheFirstRegistration() async throws {
    let task = ManualTask()
    let calls = Locked<[String]>([])
    let job = ScriptedJob { job in
      job.track(task) { _ in calls.mutate { $0.append("first") } }
      job.track(task) { _ in calls.mutate { $0.append("second") } }
      job.trackAndQueue(task)
      OperationQueue().addOperation(task)
    }
    QuietMisuse.silence(job)
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    task.finish()
    try await job.run()
    #expect(calls.value == ["first"])
    #expect(job.misuses == [JobKitError(.taskAlreadyTracked), JobKitError(.taskAlreadyTracked)])
  }

  @Test func trackingAfterTheJobFinishedIsReportedAndDoesNothing() async throws {
    let job = ScriptedJob { _ in }
    QuietMisuse.silence(job)
    try await job.run()
    let late = InstantTask()
    let called = Locked(false)
    job.trackAndQueue(late) { _ in called.mutate { $0 = true } }
    #expect(job.misuses == [JobKitError(.trackedAfterJobFinished)])
    #expect(!late.isExecuting && !late.isFinished && !called.value)
  }

  @Test func trackingAnAlreadyFinishedTaskRoutesItAtOnce() async throws {
    let done = InstantTask()
    done.start()
    let plainDone = BlockOperation {}
    plainDone.start()
    let job = ScriptedJob { job in
      job.trackAndQueue(done)
      job.track(plainDone)
    }
    QuietMisuse.silence(job)
    try await job.run()
    #expect(job.log.all.filter { $0 == "taskFinished" }.count == 2)
    #expect(job.misuses == [JobKitError(.taskAlreadyFinished), JobKitError(.taskAlreadyFinished)])
  }

  @Test func startingAJobTwiceIsReportedAndIgnored() async throws {
    let job = ScriptedJob { $0.trackAndQueue(InstantTask()) }
    QuietMisuse.silence(job)
    job.startJob()
    job.startJob()
    try await job.run()
    #expect(job.misuses == [JobKitError(.startedTwice)])
    #expect(job.log.all == ["taskFinished", "group", "all"])
  }

  @Test func misuseReachesTheDiagnosticsHandler() {
    let task = ManualTask()
    task.start()
    task.finish()
    let seen = Locked<[JobKitError]>([])
    let previous = JobKitDiagnostics.misuseHandler
    // Other tests' reports pass through to the handler that was in place.
    JobKitDiagnostics.misuseHandler = { error, operation in
      if operation === task { seen.mutate { $0.append(error) } } else { previous(error, operation) }
    }
    defer { JobKitDiagnostics.misuseHandler = previous }
    task.finish()
    #expect(seen.value == [JobKitError(.finishedTwice)])
    #expect(seen.value.first?.message.contains("already finished") == true)
  }

  @Test func anOperationsOwnHandlerTakesItsReportsOnlyAndGoesWithIt() {
    let seen = Locked<[String]>([])
    var task: ManualTask? = ManualTask("own")
    JobKitDiagnostics.setMisuseHandler({ error, _ in seen.mutate { $0.append("own \(error.code)") } }, for: task!)
    task!.finish()  // before start: reported to the task's own handler
    #expect(seen.value == ["own finishedBeforeStart"])
    let other = ManualTask("other")
    QuietMisuse.silence(other)
    other.finish()
    #expect(seen.value.count == 1 && other.misuses.count == 1)
    task = nil  // the handler is held weakly by its operation: nothing to remove by hand
    JobKitDiagnostics.setMisuseHandler(nil, for: other)
  }

  @Test func aFinishedJobItsTasksAndItsQueueAreFreed() async throws {
    let tracker = ReleaseTracker()
    do {
      let job = ScriptedJob { job in
        for index in 0..<200 {
          let task: Operation = index.isMultiple(of: 2) ? InstantTask() : BlockOperation {}
          tracker.watch(task, "task \(index)")
          job.trackAndQueue(task) { _ in }
        }
      }
      tracker.watch(job, "job")
      tracker.watch(job.queueOfTasks, "queue")
      try await job.run()
    }
    #expect(await tracker.survivors() == [])
  }

  @Test func theReleaseTrackerReportsWhatIsStillAlive() async {
    let tracker = ReleaseTracker()
    let kept = InstantTask()
    tracker.watch(kept, "kept")
    do { tracker.watch(InstantTask(), "dropped") }
    #expect(await tracker.survivors(waitingUpTo: .milliseconds(200)) == ["kept"])
    withExtendedLifetime(kept) {}
  }
}

extension JobControllerMisuseAndMemoryTests {
  @Test func twoJobsTrackingOnePlainTaskBothRouteItAndItKeepsItsOwnBlock() async throws {
    let ownBlockRuns = Locked(0)
    let ownBlockRan = Latch()
    let task = BlockOperation {}
    task.completionBlock = {
      ownBlockRuns.mutate { $0 += 1 }
      ownBlockRan.open()
    }
    let routed = Locked(0)
    let firstTracked = Latch()
    let secondTracked = Latch()
    let first = ScriptedJob { job in
      job.track(task) { _ in routed.mutate { $0 += 1 } }
      firstTracked.open()
    }
    let second = ScriptedJob { job in
      job.track(task) { _ in routed.mutate { $0 += 1 } }
      secondTracked.open()
    }
    first.startJob()
    second.startJob()
    #expect(await firstTracked.waitOpen())
    #expect(await secondTracked.waitOpen())  // both wrapped it before it runs
    OperationQueue().addOperation(task)
    try await first.run()
    try await second.run()
    #expect(await ownBlockRan.waitOpen())
    #expect(routed.value == 2)
    #expect(ownBlockRuns.value == 1)
    #expect(task.completionBlock != nil)
    task.completionBlock?()  // it is the task's own block again, not a JobKit wrapper
    #expect(ownBlockRuns.value == 2)
  }

  @Test func aGroupHandlerCapturingTheJobStronglyDoesNotLeakIt() async throws {
    final class Job: JobController, @unchecked Sendable {
      var groupCalls = 0
      override func main() {
        setCompletion(forGroup: InstantTask.self) { self.groupCalls += 1 }  // strong on purpose
        trackAndQueue(InstantTask())
      }
    }
    // Freed a moment after run() returned, not necessarily at once: the thread that finished
    // the job drops its handlers after resuming run()'s caller (seen under ThreadSanitizer).
    let tracker = ReleaseTracker()
    do {
      let job = Job()
      tracker.watch(job, "job")
      try await job.run()
      #expect(job.groupCalls == 1)
    }
    #expect(await tracker.survivors().isEmpty)
  }
}
