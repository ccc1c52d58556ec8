import Foundation
import Testing

@testable import JobKit

/// `PipelineState` fed events one by one, no threads: what each transition returns, and that the
/// user's closures it drops come back out (to be released after the lock, issue 23).
@Suite("PipelineState")
struct PipelineStateTests {
  private typealias State = PipelineState<Int>

  private static func handlers() -> (PipelineHandler<Int>, PipelineHandler<any Error>) {
    (PipelineHandler(queue: nil, body: { _ in }), PipelineHandler(queue: nil, body: { _ in }))
  }

  private static func submitted() -> State {
    let (finally, onError) = handlers()
    var state = State(plan: .steps({ _ in 1 }), errorHandler: onError)
    let accepted = state.submit(finally: finally)
    #expect(accepted)
    return state
  }

  @Test func aPipelineEndedBeforeItsStartHandsOutItsStepsAndHandlers() {
    var state = Self.submitted()
    let dropped = state.endBeforeStart()
    guard case .steps = dropped.plan else {
      Issue.record("the steps were dropped under the lock")
      return
    }
    #expect(dropped.finallyHandler != nil && dropped.errorHandler != nil)
    #expect(state.finallyHandler == nil && state.errorHandler == nil && state.result == nil)
  }

  @Test func aReplacedErrorHandlerIsHandedOut() {
    let (_, first) = Self.handlers()
    let (_, second) = Self.handlers()
    var state = State(plan: .steps({ _ in 1 }), errorHandler: first)
    let (isSet, replaced) = state.setHandler(\.errorHandler, to: second)
    #expect(isSet && replaced != nil)
    var started = Self.submitted()
    let (isSetAfterStart, replacedAfterStart) = started.setHandler(\.errorHandler, to: second)
    #expect(!isSetAfterStart && replacedAfterStart == nil)
  }

  @Test(arguments: [false, true])
  func theOutcomeCallsOneHandlerAndHandsOutBoth(fails: Bool) {
    var state = Self.submitted()
    _ = state.start()
    let outcome: Result<Int, any Error> = fails ? .failure(TestError(1)) : .success(2)
    let (end, dropped) = state.stepsEnded(outcome, cancelled: false)
    #expect(dropped.finallyHandler != nil && dropped.errorHandler != nil)
    #expect(state.finallyHandler == nil && state.errorHandler == nil)
    switch (fails, end) {
    case (false, .succeeded(2, .some)): #expect(state.result == 2)
    case (true, .failed(_, .some)): #expect(state.result == nil)
    default: Issue.record("unexpected end \(end)")
    }
  }

  /// The operation's `isCancelled`, read when the steps ended, wins although the cancel was not
  /// delivered yet (it waits for `operationStart()` to return); a delivered one wins too.
  @Test(arguments: [false, true])
  func aCancelBeforeTheEndWinsWhetherReadOrDelivered(delivered: Bool) {
    var state = Self.submitted()
    _ = state.start()
    let runner = Task<Void, Never> {}
    state.runnerCreated(runner)
    if delivered {
      let first = state.cancel()
      let second = state.cancel()
      #expect(first != nil && second == nil)
    }
    let (end, dropped) = state.stepsEnded(.success(2), cancelled: !delivered)
    guard case .cancelled = end else {
      Issue.record("a cancel before the end was lost: \(end)")
      return
    }
    #expect(dropped.finallyHandler != nil && dropped.errorHandler != nil && state.result == nil)
    let late = state.cancel()
    #expect(late == nil)
  }

  // MARK: onCancelled (issue 20)

  private static let onCancelled = PipelineHandler<Void>(queue: nil, body: { _ in })

  /// A cancelled end calls the cancellation handler and hands out every handler.
  @Test func aCancelledEndCallsTheCancellationHandler() {
    var state = Self.submitted()
    let (isSet, replaced) = state.setHandler(\.cancelHandler, to: Self.onCancelled)
    #expect(!isSet && replaced == nil)  // submitted: counts as started
    var building = State(plan: .steps({ _ in 1 }), errorHandler: nil)
    let (isSetBefore, _) = building.setHandler(\.cancelHandler, to: Self.onCancelled)
    #expect(isSetBefore)
    let (_, second) = building.setHandler(\.cancelHandler, to: Self.onCancelled)
    #expect(second != nil)  // the replaced one, to release after the lock
    _ = building.start()
    let (end, dropped) = building.stepsEnded(.failure(CancellationError()), cancelled: true)
    guard case .cancelled(.some) = end else {
      Issue.record("the cancellation handler was not called: \(end)")
      return
    }
    #expect(dropped.cancelHandler != nil && building.cancelHandler == nil)
  }

  /// `then` hands the cancellation handler on with the error handler; an end before the start
  /// hands it out.
  @Test func theCancellationHandlerIsHandedOnAndOut() {
    var state = State(plan: .steps({ _ in 1 }), errorHandler: nil, cancelHandler: Self.onCancelled)
    let (_, handlers) = state.handOver()
    #expect(handlers.cancel != nil && handlers.error == nil)
    var other = State(plan: .steps({ _ in 1 }), errorHandler: nil, cancelHandler: Self.onCancelled)
    let dropped = other.endBeforeStart()
    #expect(dropped.cancelHandler != nil && other.cancelHandler == nil)
  }

  /// A success or a failure does not call it, but hands it out.
  @Test(arguments: [false, true])
  func otherEndsHandOutTheCancellationHandler(fails: Bool) {
    var state = State(plan: .steps({ _ in 1 }), errorHandler: nil, cancelHandler: Self.onCancelled)
    _ = state.start()
    let outcome: Result<Int, any Error> = fails ? .failure(TestError(1)) : .success(2)
    let (end, dropped) = state.stepsEnded(outcome, cancelled: false)
    if case .cancelled = end { Issue.record("not cancelled: \(end)") }
    #expect(dropped.cancelHandler != nil && state.cancelHandler == nil)
  }
}
