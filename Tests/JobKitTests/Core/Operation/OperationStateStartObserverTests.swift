import Testing

@testable import JobKit

/// `OperationState`'s start observers (added by each job whose events are listened to, and holding
/// that job), fed events on one thread: it leaves the state on every start, a cancelled one
/// included, and is handed out so that it is released after the lock (issue 23).
@Suite("OperationState start observer")
struct OperationStateStartObserverTests {
  private final class StartObserver: OperationStartObserver, @unchecked Sendable {
    // @unchecked Sendable: no state.
    func operationDidStart(_ operation: ConcurrentOperation) {}
  }

  @Test(arguments: [false, true])
  func theStartObserverLeavesTheStateWhenTheOperationStarts(cancelledFirst: Bool) {
    let observer = StartObserver()
    var state = OperationState()
    let added = state.addStartObserver(observer)
    #expect(added)
    if cancelledFirst {
      _ = state.cancel()
    }
    switch state.start() {
    case .run(let handedOut):
      #expect(!cancelledFirst && handedOut.count == 1 && handedOut.first === observer)
    case .skipCancelled(let dropped):
      // Handed out so that its release (it holds the job) happens after the lock.
      #expect(cancelledFirst && dropped.count == 1 && dropped.first === observer)
    case .alreadyStarted, .deferred:
      Issue.record("started twice, or deferred though not suspended")
    }
    #expect(state.startObservers.isEmpty)
  }

  /// Each job that tracks the operation adds its observer: all are told, in the order added,
  /// and none is added once the operation started.
  @Test func everyStartObserverIsToldInTheOrderAdded() {
    let observers = [StartObserver(), StartObserver()]
    var state = OperationState()
    #expect(observers.allSatisfy { state.addStartObserver($0) })
    guard case .run(let handedOut) = state.start() else {
      Issue.record("the operation did not run")
      return
    }
    #expect(handedOut.count == 2 && handedOut[0] === observers[0] && handedOut[1] === observers[1])
    #expect(!state.addStartObserver(StartObserver()) && state.startObservers.isEmpty)
  }
}

/// `OperationState`'s reason of a job's failing stop (`fail(_:)`, a time limit), recorded with
/// the stop in the job's state: it replaces a cancel's until the operation finished.
@Suite("OperationState failure reason")
struct OperationStateFailureReasonTests {
  @Test func aFailingStopReplacesACancelsReasonUntilTheOperationFinished() {
    var state = OperationState()
    #expect(state.recordCancellationReason(TestError(5)) == nil)
    #expect(state.recordFailingStop(TestError(6)) as? TestError == TestError(5))
    #expect(state.cancellationReason as? TestError == TestError(6))
    #expect(state.recordCancellationReason(TestError(7)) as? TestError == TestError(7))
    #expect(state.cancellationReason as? TestError == TestError(6))
    _ = state.start()
    _ = state.finish(error: nil)
    #expect(state.recordFailingStop(TestError(8)) as? TestError == TestError(8))
    #expect(state.cancellationReason as? TestError == TestError(6))
  }
}
