import Foundation
import Testing

@testable import JobKit

private struct NoTimer: JobTimer {
  func cancel() {}
}

@Suite("TimeLimit and cancellation reason transitions")
struct TimeLimitStateTests {
  @Test func aLimitIsSetBeforeTheStartArmedAtItAndExpiresOnce() {
    var limit = TimeLimit()
    let r1 = limit.set(.seconds(3))
    #expect(r1)
    #expect(limit.limit == .seconds(3))
    let r2 = limit.begin()
    #expect(r2 == .seconds(3))
    let r3 = limit.set(.seconds(1))
    #expect(!r3)  // measured from the start: too late
    let r4 = limit.scheduled(NoTimer())
    #expect(r4)
    let first = limit.expire()
    #expect(first.ranOut && first.timer != nil)
    let r5 = limit.expire()
    #expect(!r5.ranOut)
    let r6 = limit.end()
    #expect(r6 == nil)
  }

  @Test func aFinishBeforeTheTimerWasRecordedMakesTheCallerCancelIt() {
    var limit = TimeLimit()
    _ = limit.set(.seconds(1))
    _ = limit.begin()
    let r7 = limit.end()
    #expect(r7 == nil)
    let r8 = limit.scheduled(NoTimer())
    #expect(!r8)
    let r9 = limit.expire()
    #expect(!r9.ranOut)
  }

  @Test func theFinishHandsOutTheArmedTimer() {
    var limit = TimeLimit()
    _ = limit.set(.seconds(1))
    _ = limit.begin()
    _ = limit.scheduled(NoTimer())
    let r10 = limit.end()
    #expect(r10 != nil)
    let r11 = limit.expire()
    #expect(!r11.ranOut)
  }

  @Test func noLimitArmsNothingAndCanBeRemoved() {
    var limit = TimeLimit()
    let r12 = limit.set(.seconds(1))
    #expect(r12)
    let r13 = limit.set(nil)
    #expect(r13)
    let r14 = limit.begin()
    #expect(r14 == nil)
    let r15 = limit.expire()
    #expect(!r15.ranOut)
  }

  @Test func theFirstCancellationReasonWinsAndNoneIsRecordedAfterTheFinish() {
    var state = OperationState()
    let r16 = state.recordCancellationReason(TestError(1))
    #expect(r16 == nil)
    let r17 = state.recordCancellationReason(TestError(2))
    #expect(r17 as? TestError == TestError(2))
    #expect(state.cancellationReason as? TestError == TestError(1))

    var finished = OperationState()
    _ = finished.start()
    _ = finished.finish(error: nil)
    let r18 = finished.recordCancellationReason(TestError(3))
    #expect(r18 != nil)
    #expect(finished.cancellationReason == nil)
  }

  @Test func aFailingStopCarriesItsErrorAndACancelItsOperationsReason() {
    var failing = JobState()
    let r19 = failing.stop(.failed(TestError(4)))
    #expect(r19.reason as? TestError == TestError(4))
    #expect(failing.phase.stopError as? TestError == TestError(4))
    var cancelled = JobState()
    let r20 = cancelled.stop(.cancelled(reason: nil))
    #expect(r20.reason is CancellationError)
    #expect(cancelled.phase.stopError == nil)
  }
}
