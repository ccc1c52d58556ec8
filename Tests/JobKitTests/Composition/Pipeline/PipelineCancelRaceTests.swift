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
    let pipeline = twoLoggedSteps(log).onError { _ in log.record("onError") }
    #expect(pipeline.addStartObserver(CancelOnStart()))
    let outcome = await starter.outcome(of: pipeline)
    #expect(throws: CancellationError.self) { try outcome.get() }
    #expect(log.all.isEmpty, "steps ran after a cancel() that returned before the first one: \(log.all)")
    #expect(pipeline.isCancelled && pipeline.isFinished)
    #expect(pipeline.error == nil && pipeline.result == nil)
  }

  /// The same race left to chance, 3,000 times: a thread starts the pipeline (`start()`, as a
  /// queue does) while another cancels it, both let go at once. A step body that sees `cancel()`
  /// had returned (the flag is set just after it returned) can only be one that passed its
  /// checkpoint just before the cancel: at most one such step, and then the pipeline ends
  /// cancelled (its steps ended after the cancel). On the old code, a lost cancel let the later
  /// steps run and the pipeline succeed.
  @Test func aCancelRacingTheStartRunsNoLaterStep() async throws {
    let broken = Locked<[String]>([])
    for _ in 0..<3_000 {
      let cancelReturned = Locked(false)
      let lateSteps = Locked(0)
      let step: @Sendable (Int) -> Int = { value in
        if cancelReturned.value { lateSteps.mutate { $0 += 1 } }
        return value + 1
      }
      let pipeline = Pipeline.start { step(0) }.then(step).then(step)
      let go = Latch()
      let cancelled = Latch()
      Thread {
        go.wait()
        pipeline.start()
      }.start()
      Thread {
        go.wait()
        pipeline.cancel()
        cancelReturned.mutate { $0 = true }
        cancelled.open()
      }.start()
      go.open()
      _ = try? await pipeline.waitForFinish()
      #expect(await cancelled.waitOpen(timeout: 30))
      let late = lateSteps.value
      let consistent = pipeline.result == 3 || (pipeline.result == nil && pipeline.isCancelled)
      if late > 1 || (late > 0 && pipeline.result != nil) || !consistent || pipeline.error != nil {
        broken.mutate { $0.append("\(late) late step(s), result \(String(describing: pipeline.result))") }
      }
    }
    #expect(broken.value.isEmpty, "\(broken.value.count) pipelines: \(broken.value.prefix(5))")
  }
}

/// A pipeline of two steps that record "step 1" and "step 2" in `log` and return 1, then 2.
func twoLoggedSteps(_ log: EventLog) -> Pipeline<Int> {
  Pipeline.start { () -> Int in
    log.record("step 1")
    return 1
  }
  .then { value -> Int in
    log.record("step 2")
    return value + 1
  }
}
