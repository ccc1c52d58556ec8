import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A stopped job waits for every task it cancelled; one that ignores its cancel is reported,
/// named, after `cancellationGracePeriod` on the job's clock.
@Suite("Tasks still unfinished after a cancel are reported")
struct CancellationGraceTests {
  init() { _ = QuietMisuse.install }

  @Test func aTaskIgnoringItsCancelIsNamedAfterTheGracePeriodAndStillWaitedFor() async throws {
    let clock = ManualClock()
    let stubborn = ManualTask("upload", finishesOnCancel: false)
    let job = ScriptedJob { job in job.trackAndQueue(stubborn) }
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
    let previous = JobKitDiagnostics.misuseHandler
    let job = ScriptedJob { job in job.trackAndQueue(stubborn) }
    JobKitDiagnostics.misuseHandler = { error, operation in
      if operation === job, error.code == .unfinishedAfterCancel { reported.mutate { $0.append(error.message) } }
    }
    defer { JobKitDiagnostics.misuseHandler = previous }
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
