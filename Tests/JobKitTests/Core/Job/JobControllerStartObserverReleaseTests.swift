import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// What a task's start observer keeps alive when a job's events are listened to (issue 23).
@Suite("JobController start observers and memory")
struct JobControllerStartObserverReleaseTests {
  /// A task cancelled before it started, in a job whose events are listened to, drops its start
  /// observer (which holds the job) when it starts: the job, its queue and all it holds are
  /// freed once the job finished, although the task lives on.
  @Test func aTaskCancelledBeforeItStartedDoesNotKeepItsJob() async throws {
    let tracker = ReleaseTracker()
    let kept = ManualTask("kept")
    do {
      let tracked = Latch()
      let job = ScriptedJob { job in
        job.track(kept)  // the test starts it
        tracked.open()
      }
      tracker.watch(job, "job")
      tracker.watch(job.queueOfTasks, "queue")
      let events = job.events
      let drained = Task { await events.reduce(0) { count, _ in count + 1 } }
      job.startJob()
      #expect(await tracked.waitOpen())  // tracked, with its start observer set
      job.cancel()  // cancels `kept` before it started
      kept.start()  // finishes at once, cancelled, without running
      await #expect(throws: CancellationError.self) { try await job.run() }
      #expect(await drained.value > 0)
      #expect(kept.isFinished && !kept.didStart)
    }
    #expect(await tracker.survivors(waitingUpTo: .seconds(5)) == [])
    withExtendedLifetime(kept) {}
  }
}
