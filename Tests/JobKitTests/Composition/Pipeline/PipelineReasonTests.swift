import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job that an operation's Swift task runs with `run()` (a pipeline's step, an async
/// `BlockTask` or `Work` body), which tracks `deep`; `thrown` records what its `run()` threw.
private struct InnerJob {
  let deep = ManualTask("deep")
  let job: ScriptedJob
  let thrown = Locked<(any Error)?>(nil)

  init() {
    let deep = deep
    job = ScriptedJob { $0.trackAndQueue(deep) }
  }

  /// Runs the job, recording what its `run()` threw.
  func run() async throws {
    do {
      try await job.run()
    } catch {
      thrown.mutate { $0 = error }
      throw error
    }
  }

  /// A job tracking `outer` (which runs this job) is cancelled with `reason` once `deep` runs:
  /// this job's `run()` throws the reason, and it and `deep` see it.
  func expectReasonHandedDown(through outer: Operation, reason: TestError) async {
    let job = ScriptedJob { $0.trackAndQueue(outer) }
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    job.cancel(reason: reason)
    await #expect(throws: reason) { try await job.run() }
    #expect(thrown.value as? TestError == reason)
    #expect(self.job.cancellationReason as? TestError == reason)
    #expect(deep.cancellationReason as? TestError == reason)
  }
}

/// A job a pipeline's step runs with `run()`, stopped through the pipeline: its `run()` throws
/// the reason the pipeline was stopped with, and it and its tasks see that reason.
@Suite("Pipeline steps see the pipeline's cancellation reason")
struct PipelineReasonTests {
  /// A pipeline whose one step runs `inner`.
  private static func pipeline(running inner: InnerJob) -> Pipeline<Int> {
    Pipeline.start { () async throws -> Int in
      try await inner.run()
      return 1
    }
  }

  @Test func aJobRunInAStepThrowsTheReasonItsPipelineWasCancelledWith() async {
    let inner = InnerJob()
    let pipeline = Self.pipeline(running: inner)
    await inner.expectReasonHandedDown(through: pipeline, reason: TestError(41))
    #expect(pipeline.cancellationReason as? TestError == TestError(41))
  }

  @Test func aJobRunInAStepSeesTheTimeLimitOfTheJobAbove() async {
    let clock = ManualClock()
    let inner = InnerJob()
    let pipeline = Self.pipeline(running: inner)
    let job = ScriptedJob { $0.trackAndQueue(pipeline) }
    job.clock = clock
    job.timeLimit = .seconds(3)
    job.startJob()
    #expect(await inner.deep.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(3))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await job.run() }
    #expect(inner.thrown.value as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(inner.job.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(inner.deep.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
  }

  @Test func aPlainCancelStillMeansCancellationError() async {
    let inner = InnerJob()
    let pipeline = Self.pipeline(running: inner)
    let running = Task { try await pipeline.run() }
    #expect(await inner.deep.startedLatch.waitOpen())
    pipeline.cancel()
    await #expect(throws: CancellationError.self) { _ = try await running.value }
    #expect(inner.thrown.value is CancellationError)
    #expect(inner.job.cancellationReason is CancellationError)
  }
}

/// The same for a job that an async `BlockTask` or `Work` body runs.
@Suite("Async task bodies see their task's cancellation reason")
struct TaskBodyReasonTests {
  @Test func aJobRunInABlockTasksBodyThrowsTheReasonTheTaskWasCancelledWith() async {
    let inner = InnerJob()
    await inner.expectReasonHandedDown(through: BlockTask(async: { try await inner.run() }), reason: TestError(43))
  }

  @Test func aJobRunInAWorksBodyThrowsTheReasonTheWorkWasCancelledWith() async {
    let inner = InnerJob()
    let work = Work<Int> { () async throws -> Int in
      try await inner.run()
      return 1
    }
    await inner.expectReasonHandedDown(through: work, reason: TestError(44))
  }
}
