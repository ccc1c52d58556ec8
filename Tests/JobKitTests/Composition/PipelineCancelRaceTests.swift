import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 23, item 1: a `cancel()` landing while the pipeline operation is being started (after
/// Foundation's `start()` read `isCancelled`, before the pipeline recorded that it runs) was
/// dropped, and every step ran.
@Suite("Pipeline: a cancel during the start", .timeLimit(.minutes(1)))
struct PipelineCancelRaceTests {
  /// Cancels the operation it observes from inside `start()`: after `ConcurrentOperation` moved
  /// to its starting phase (so `start()` no longer skips it as cancelled) and before
  /// `operationStart()` runs. That is the window in which the cancel was lost.
  private final class CancelOnStart: OperationStartObserver {
    func operationDidStart(_ operation: ConcurrentOperation) {
      operation.cancel()
    }
  }

  @Test(arguments: PipelineStarter.allCases)
  func aCancelThatReturnedAsTheStartBeganRunsNoStepAndNoHandler(starter: PipelineStarter) async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { () -> Int in
      log.record("step 1")
      return 1
    }
    .then { value -> Int in
      log.record("step 2")
      return value + 1
    }
    .onError { _ in log.record("onError") }
    #expect(pipeline.setStartObserver(CancelOnStart()))
    let outcome = await starter.outcome(of: pipeline)
    #expect(throws: CancellationError.self) { try outcome.get() }
    #expect(log.all.isEmpty, "steps ran after a cancel() that returned before the first one: \(log.all)")
    #expect(pipeline.isCancelled && pipeline.isFinished)
    #expect(pipeline.error == nil && pipeline.result == nil)
  }
}
