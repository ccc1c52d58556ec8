import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 20, item 1, for pipelines: a step that cancels itself (throws `CancellationError`
/// while the pipeline was not cancelled) cancels the pipeline, and `onCancelled` reports a
/// cancelled pipeline.
@Suite("Pipeline: a step that cancels itself", .timeLimit(.minutes(1)))
struct PipelineSelfCancelTests {
  /// CompositeOperations `COCascadeOperationTests.testCascadeOperation_cancel_inner_operation`
  /// (a cascade's step cancels itself: the later steps never run, the cancellation handler runs
  /// instead of the completion), with BlockSequence's "Cancellable" (a cancelled sequence does
  /// not proceed to the next operation).
  @Test func aStepThatThrowsCancellationErrorCancelsThePipeline() async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { 1 }
      .then { (_: Int) -> Int in throw CancellationError() }
      .then { value in
        log.record("later step")
        return value
      }
      .onError { _ in log.record("onError") }
      .onCancelled { log.record("onCancelled") }
    await #expect(throws: CancellationError.self) { try await pipeline.run() }
    #expect(log.all == ["onCancelled"])
    #expect(pipeline.isCancelled && pipeline.error == nil && pipeline.result == nil)
  }

  /// `cancel()` while a step runs: the handler runs once, before the pipeline finishes.
  @Test func aCancelCallsTheHandlerOnce() async throws {
    let started = PipelineGate()
    let calls = Locked(0)
    let finishedDuringCall = Locked(false)
    let box = Locked<Pipeline<Int>?>(nil)
    let pipeline = Pipeline.start { () -> Int in
      started.open()
      await suspendUntilTaskCancelled()
      throw CancellationError()
    }
    .onCancelled {
      calls.mutate { $0 += 1 }
      if box.value?.isFinished == true { finishedDuringCall.mutate { $0 = true } }
    }
    box.mutate { $0 = pipeline }
    pipeline.finally { _ in Issue.record("finally after a cancel") }
    await started.wait()
    pipeline.cancel()
    #expect(await pipeline.finishedSoon())
    #expect(calls.value == 1 && !finishedDuringCall.value)
    #expect(pipeline.isCancelled && pipeline.error == nil)
    box.mutate { $0 = nil }
  }

  /// Cancelled before its queue started it: no step runs, the handler does, on `queue` if given.
  @Test(arguments: [false, true])
  func aCancelBeforeTheStartCallsTheHandler(onQueue: Bool) async throws {
    let queue = PipelineMarkedQueue("onCancelled")
    let onQueueSeen = Locked<Bool?>(nil)
    let ran = Locked(false)
    let pipeline = Pipeline.start { ran.mutate { $0 = true } }
    let handler: @Sendable () -> Void = { onQueueSeen.mutate { $0 = queue.isCurrent } }
    let withHandler = onQueue ? pipeline.onCancelled(on: queue.queue, handler) : pipeline.onCancelled(handler)
    withHandler.cancel()
    await #expect(throws: CancellationError.self) { try await withHandler.run() }
    #expect(!ran.value)
    #expect(onQueueSeen.value == onQueue)
  }

  /// The handler survives a `then` that changes the output type; set on a started pipeline, it
  /// gives a pipeline that fails with `modifiedAfterStart`.
  @Test func theHandlerFollowsThenAndIsRefusedAfterTheStart() async throws {
    let called = Latch()
    let pipeline = Pipeline.start { 1 }
      .onCancelled { called.open() }
      .then { (_: Int) -> String in throw CancellationError() }
    await #expect(throws: CancellationError.self) { try await pipeline.run() }
    #expect(called.opened)
    let late = pipeline.onCancelled {}
    await #expect(throws: JobKitError.self) { try await late.run() }
    #expect((late.error as? JobKitError)?.code == .modifiedAfterStart)
  }

  /// A pipeline whose step cancelled itself is a task that cancelled itself: it cancels the
  /// `SequentialGroup` it is a step of, whose later step never runs.
  @Test func aSelfCancelledPipelineCancelsItsGroup() async throws {
    let ran = Locked(false)
    let pipeline = Pipeline.start { () -> Int in throw CancellationError() }
    let group = SequentialGroup([pipeline, BlockTask { ran.mutate { $0 = true } }])
    let counter = CancellationCounter()
    counter.watch(group)
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(!ran.value && group.isCancelled && counter.count == 1)
  }
}
