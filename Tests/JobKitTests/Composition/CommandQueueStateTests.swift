import Foundation
import Testing

@testable import JobKit

/// `CommandQueueState`'s transitions fed one by one on one thread (issue 23, items 3 and 4): a
/// burst starts once the `add` that made it returned and, in sequential mode, every older burst
/// finished; `cancelAll()` cancels every burst at once. The groups are identities only: none is
/// started.
@Suite("CommandQueueState")
struct CommandQueueStateTests {
  private func installed(_ install: CommandQueueState.Install) -> Bool {
    if case .installed = install { return true }
    return false
  }

  @Test(arguments: [true, false])
  func aBurstMadeAfterCancelAllWaitsForTheOlderOneInSequentialModeOnly(sequential: Bool) {
    var state = CommandQueueState(isSequential: sequential)
    let first = ConcurrentGroup()
    let install = state.install(first)
    #expect(installed(install))
    let startFirst = state.addReturned(to: first, accepted: true, installed: true)
    #expect(startFirst === first)
    let cancelled = state.cancelAll()
    #expect(cancelled.count == 1 && cancelled.first === first && state.open == nil)
    let second = ConcurrentGroup()
    let claim = state.claim()
    guard case .needsBurst = claim else {
      Issue.record("expected needsBurst")
      return
    }
    _ = state.install(second)
    let startSecond = state.addReturned(to: second, accepted: true, installed: true)
    if sequential {
      #expect(startSecond == nil && state.bursts.last?.start == .waiting)
      let end = state.burstFinished(first, failures: [])
      #expect(end.start === second && state.bursts.first?.start == .started)
    } else {
      #expect(startSecond === second)
      let end = state.burstFinished(first, failures: [])
      #expect(end.start == nil)
    }
  }

  /// A sequential queue whose first burst's `add` returned and was cancelled, and whose second
  /// burst was installed (its `add` still running): the second waits for the first.
  private static func aBurstAfterACancelledOne() -> (CommandQueueState, ConcurrentGroup, ConcurrentGroup) {
    var state = CommandQueueState(isSequential: true)
    let first = ConcurrentGroup()
    _ = state.install(first)
    _ = state.addReturned(to: first, accepted: true, installed: true)
    _ = state.cancelAll()
    let second = ConcurrentGroup()
    _ = state.install(second)
    return (state, first, second)
  }

  /// The older burst finishes before the `add` that made the newer one returned: that `add`
  /// starts it.
  @Test func aBurstWhoseOlderOneFinishedWhileItsAddRanStartsWhenTheAddReturns() {
    var (state, first, second) = Self.aBurstAfterACancelledOne()
    let end = state.burstFinished(first, failures: [])
    #expect(end.start == nil && state.bursts.first?.start == .installing)
    let start = state.addReturned(to: second, accepted: true, installed: true)
    #expect(start === second)
  }

  /// Commands joining a burst never start it; a rejected one makes the next `add` make a new
  /// burst.
  @Test func joinersNeverStartABurstAndARejectionClosesIt() {
    var state = CommandQueueState(isSequential: true)
    let burst = ConcurrentGroup()
    _ = state.install(burst)
    guard case .join(let joined) = state.claim() else {
      Issue.record("expected join")
      return
    }
    #expect(joined === burst)
    let byJoiner = state.addReturned(to: burst, accepted: true, installed: false)
    #expect(byJoiner == nil)
    let byInstaller = state.addReturned(to: burst, accepted: true, installed: true)
    #expect(byInstaller === burst)
    let again = state.addReturned(to: burst, accepted: false, installed: false)
    #expect(again == nil && state.open == nil)
  }

  /// A waiting burst counts as running: `drained()` waits for it and the queue drains only once
  /// it finished too.
  @Test func aWaitingBurstKeepsTheQueueFromDraining() {
    var (state, first, second) = Self.aBurstAfterACancelledOne()
    _ = state.addReturned(to: second, accepted: true, installed: true)
    let firstEnd = state.burstFinished(first, failures: [])
    #expect(firstEnd.start === second && state.bursts.count == 1)
    let secondEnd = state.burstFinished(second, failures: [])
    #expect(secondEnd.start == nil && state.bursts.isEmpty)
  }
}
