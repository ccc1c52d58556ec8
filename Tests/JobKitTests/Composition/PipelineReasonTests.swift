import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job a pipeline's step runs with `run()`, stopped through the pipeline: its `run()` throws
/// the reason the pipeline was stopped with, and it and its tasks see that reason.
@Suite("Pipeline steps see the pipeline's cancellation reason")
struct PipelineReasonTests {
  /// A pipeline whose one step runs `inner` (which tracks `deep`) and records what its `run()`
  /// threw.
  private static func pipeline(running inner: JobController, thrown: Locked<(any Error)?>) -> Pipeline<Int> {
    Pipeline.start { () async throws -> Int in
      do {
        try await inner.run()
      } catch {
        thrown.mutate { $0 = error }
        throw error
      }
      return 1
    }
  }

  @Test func aJobRunInAStepThrowsTheReasonItsPipelineWasCancelledWith() async {
    let deep = ManualTask("deep")
    let inner = ScriptedJob { $0.trackAndQueue(deep) }
    let thrown = Locked<(any Error)?>(nil)
    let pipeline = Self.pipeline(running: inner, thrown: thrown)
    let job = ScriptedJob { $0.trackAndQueue(pipeline) }
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    job.cancel(reason: TestError(41))
    await #expect(throws: TestError(41)) { try await job.run() }
    #expect(thrown.value as? TestError == TestError(41))
    #expect(pipeline.cancellationReason as? TestError == TestError(41))
    #expect(inner.cancellationReason as? TestError == TestError(41))
    #expect(deep.cancellationReason as? TestError == TestError(41))
  }

  @Test func aJobRunInAStepSeesTheTimeLimitOfTheJobAbove() async {
    let clock = ManualClock()
    let deep = ManualTask("deep")
    let inner = ScriptedJob { $0.trackAndQueue(deep) }
    let thrown = Locked<(any Error)?>(nil)
    let pipeline = Self.pipeline(running: inner, thrown: thrown)
    let job = ScriptedJob { $0.trackAndQueue(pipeline) }
    job.clock = clock
    job.timeLimit = .seconds(3)
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(3))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await job.run() }
    #expect(thrown.value as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(inner.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
    #expect(deep.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
  }

  @Test func aPlainCancelStillMeansCancellationError() async {
    let deep = ManualTask("deep")
    let inner = ScriptedJob { $0.trackAndQueue(deep) }
    let thrown = Locked<(any Error)?>(nil)
    let pipeline = Self.pipeline(running: inner, thrown: thrown)
    let running = Task { try await pipeline.run() }
    #expect(await deep.startedLatch.waitOpen())
    pipeline.cancel()
    await #expect(throws: CancellationError.self) { _ = try await running.value }
    #expect(thrown.value is CancellationError)
    #expect(inner.cancellationReason is CancellationError)
  }
}

/// The same for a job that an async `BlockTask` or `Work` body runs.
@Suite("Async task bodies see their task's cancellation reason")
struct TaskBodyReasonTests {
  @Test func aJobRunInABlockTasksBodyThrowsTheReasonTheTaskWasCancelledWith() async {
    let deep = ManualTask("deep")
    let inner = ScriptedJob { $0.trackAndQueue(deep) }
    let thrown = Locked<(any Error)?>(nil)
    let task = BlockTask(async: {
      do {
        try await inner.run()
      } catch {
        thrown.mutate { $0 = error }
        throw error
      }
    })
    let job = ScriptedJob { $0.trackAndQueue(task) }
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    job.cancel(reason: TestError(43))
    await #expect(throws: TestError(43)) { try await job.run() }
    #expect(thrown.value as? TestError == TestError(43))
    #expect(inner.cancellationReason as? TestError == TestError(43))
    #expect(deep.cancellationReason as? TestError == TestError(43))
  }

  @Test func aJobRunInAWorksBodyThrowsTheReasonTheWorkWasCancelledWith() async {
    let deep = ManualTask("deep")
    let inner = ScriptedJob { $0.trackAndQueue(deep) }
    let thrown = Locked<(any Error)?>(nil)
    let work = Work<Int> { () async throws -> Int in
      do {
        try await inner.run()
      } catch {
        thrown.mutate { $0 = error }
        throw error
      }
      return 1
    }
    let job = ScriptedJob { $0.trackAndQueue(work) }
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    job.cancel(reason: TestError(44))
    await #expect(throws: TestError(44)) { try await job.run() }
    #expect(thrown.value as? TestError == TestError(44))
    #expect(inner.cancellationReason as? TestError == TestError(44))
  }
}
