import Testing

@testable import JobKit

/// `OperationState`'s start observer (set by a job whose events are listened to, and holding
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
    let set = state.setStartObserver(observer)
    #expect(set)
    if cancelledFirst {
      _ = state.cancel()
    }
    switch state.start(isCancelled: false) {
    case .run(let handedOut):
      #expect(!cancelledFirst && handedOut === observer)
    case .skipCancelled(let dropped):
      // Handed out so that its release (it holds the job) happens after the lock.
      #expect(cancelledFirst && dropped === observer)
    case .alreadyStarted, .deferred:
      Issue.record("started twice, or deferred though not suspended")
    }
    #expect(state.startObserver == nil)
  }
}
