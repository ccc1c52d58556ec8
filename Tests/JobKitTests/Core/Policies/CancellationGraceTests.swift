import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A stopped job waits for every task it cancelled; one that ignores its cancel is reported,
/// named, after `cancellationGracePeriod` on the job's clock.
@Suite("Tasks still unfinished after a cancel are reported")
struct CancellationGraceTests {
  @Test func aTaskIgnoringItsCancelIsNamedAfterTheGracePeriodAndStillWaitedFor() async throws {
    let clock = ManualClock()
    let stubborn = ManualTask("upload", finishesOnCancel: false)
    let job = ScriptedJob { job in job.trackAndQueue(stubborn) }
    QuietMisuse.silence(job)
    job.clock = clock
    job.cancellationGracePeriod = .seconds(5)
    job.startJob()
    #expect(await stubborn.startedLatch.waitOpen())
    job.cancel()
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .milliseconds(4_999))
    #expect(job.misuses.isEmpty)
    clock.advance(by: .milliseconds(1))
    let report = try #require(job.misuses.first)
    #expect(job.misuses == [JobKitError(.unfinishedAfterCancel)])
    #expect(report.message.contains("TestTask \"upload\""))
    #expect(!job.isFinished)  // the job still waits for it
    stubborn.finish()
    await #expect(throws: CancellationError.self) { try await job.run() }
  }

  @Test func tasksThatFinishOnCancelAreNotReportedAndTheTimerIsCancelled() async throws {
    let clock = ManualClock()
    let polite = ManualTask("polite", finishesOnCancel: true)
    let job = ScriptedJob { job in job.trackAndQueue(polite) }
    QuietMisuse.silence(job)
    job.clock = clock
    job.startJob()
    #expect(await polite.startedLatch.waitOpen())
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(clock.pendingCount == 0)
    clock.advance(by: .seconds(60))
    #expect(job.misuses.isEmpty)
  }

  @Test func noGracePeriodMeansNoReport() async throws {
    let clock = ManualClock()
    let stubborn = ManualTask(finishesOnCancel: false)
    let job = ScriptedJob { job in job.trackAndQueue(stubborn) }
    QuietMisuse.silence(job)
    job.clock = clock
    job.cancellationGracePeriod = nil
    job.startJob()
    #expect(await stubborn.startedLatch.waitOpen())
    job.cancel()
    #expect(clock.scheduledCount == 0)
    stubborn.finish()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(job.misuses.isEmpty)
  }

  @Test func aFailedJobReportsToo() async throws {
    let clock = ManualClock()
    let stubborn = ManualTask("stubborn", finishesOnCancel: false)
    let reported = Locked<[String]>([])
    let job = ScriptedJob { job in job.trackAndQueue(stubborn) }
    // This job's reports only; every other test's still reach the process-wide handler.
    JobKitDiagnostics.setMisuseHandler(
      { error, _ in
        if error.code == .unfinishedAfterCancel { reported.mutate { $0.append(error.message) } }
      }, for: job)
    job.clock = clock
    job.startJob()
    #expect(await stubborn.startedLatch.waitOpen())
    job.fail(TestError(1))
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(10))  // the default period
    #expect(reported.value.count == 1)
    #expect(reported.value.first?.contains("ScriptedJob") == true)
    stubborn.finish()
    await #expect(throws: TestError(1)) { try await job.run() }
  }
}
