import Testing

@testable import JobKit

/// A job's stop and its reason are one transition of its `JobState` (its operation state is part
/// of it): a cancel and a fail racing each other give one outcome, whichever order they come in.
@Suite("JobState stop and reason")
struct JobStateStopTests {
  private func started() -> JobState {
    var state = JobState()
    _ = state.operation.start()
    _ = state.beginMain(on: 1)
    return state
  }

  @Test func aFailRecordsItsReasonWithItsStop() {
    var state = started()
    let actions = state.stop(.failed(TestError(1)))
    #expect(actions.reason as? TestError == TestError(1))
    #expect(state.operation.cancellationReason as? TestError == TestError(1))
    #expect(state.phase.stopError as? TestError == TestError(1))
  }

  @Test func aCancelAfterAFailKeepsTheFailure() {
    var state = started()
    _ = state.stop(.failed(TestError(1)))
    _ = state.operation.recordCancel()
    let actions = state.cancel()
    #expect(actions.reason == nil)  // the job was stopping already: nothing to do
    #expect(state.operation.cancellationReason as? TestError == TestError(1))
    #expect(state.phase.stopError as? TestError == TestError(1))
  }

  @Test func aFailBetweenACancelsTwoStepsFailsTheJob() {
    var state = started()
    // `cancel()`'s first step records the cancel and its reason, then the fail comes.
    _ = state.operation.recordCancellationReason(TestError(2))
    _ = state.operation.recordCancel()
    let failing = state.stop(.failed(TestError(3)))
    #expect(failing.replacedReason as? TestError == TestError(2))
    #expect(failing.reason as? TestError == TestError(3))
    // The cancel's stop, its second step, changes nothing.
    #expect(state.cancel().reason == nil)
    #expect(state.operation.cancellationReason as? TestError == TestError(3))
    #expect(state.phase.stopError as? TestError == TestError(3))
  }

  @Test func aCancelStopsWithItsReasonAndAFailAfterItChangesNothing() {
    var state = started()
    _ = state.operation.recordCancellationReason(TestError(4))
    _ = state.operation.recordCancel()
    let cancelling = state.cancel()
    #expect(cancelling.reason as? TestError == TestError(4))
    guard case .cancelled(let reason)? = state.phase.stop else {
      Issue.record("not cancelled: \(String(describing: state.phase.stop))")
      return
    }
    #expect(reason as? TestError == TestError(4))
    #expect(state.stop(.failed(TestError(5))).reason == nil)
    #expect(state.operation.cancellationReason as? TestError == TestError(4))
  }

  @Test func aPlainCancelHandsDownCancellationErrorAndKeepsNoReasonForEvents() {
    var state = started()
    _ = state.operation.recordCancel()
    let cancelling = state.cancel()
    #expect(cancelling.reason is CancellationError)
    guard case .cancelled(nil)? = state.phase.stop else {
      Issue.record("not a plain cancel: \(String(describing: state.phase.stop))")
      return
    }
  }
}
