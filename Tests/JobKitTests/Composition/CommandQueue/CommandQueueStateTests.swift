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

/// `drained()` callers and `onDrained` calls (issue 23, seeds 87 and 244 of the composition
/// model): a caller is resumed once its bursts finished and every `onDrained` call begun by then
/// returned; a caller whose bursts finish beside a newer burst gets the unreported failures
/// reported first, without waiting for the newer burst. Fed one by one on one thread; the
/// continuations are real ones, which the state only stores and hands back.
@Suite("CommandQueueState: drained() and onDrained")
struct CommandQueueStateDrainTests {
  private static let failure = TaskFailure(taskName: "fails", group: "Test", error: TestError(1))

  /// Gives `body` the continuation of a `drained()` caller and resumes it once, as
  /// `CommandQueue` does, with whatever `body` returns as handed back (each hand-back is counted;
  /// if none was, the continuation is resumed anyway, so a wrong transition fails, not hangs).
  private func handBacks(
    _ body: (CheckedContinuation<Void, Never>) -> [CheckedContinuation<Void, Never>]
  ) async -> Int {
    var count = 0
    await withCheckedContinuation { (caller: CheckedContinuation<Void, Never>) in
      let back = body(caller)
      count = back.count
      (back.first ?? caller).resume()
    }
    return count
  }

  /// Registers `caller` as a `drained()` caller, then cancels the queue's commands and starts
  /// `newer` as a new burst beside the running one.
  private static func awaitDrain(
    of state: inout CommandQueueState,
    _ caller: CheckedContinuation<Void, Never>,
    thenCancelAndStart newer: ConcurrentGroup
  ) {
    let id = state.makeDrainWaiter()
    let registered = state.awaitDrain(id, caller)
    #expect(registered)
    _ = state.cancelAll()
    _ = state.install(newer)
    _ = state.addReturned(to: newer, accepted: true, installed: true)
  }

  /// A queue with one started burst, and the drained handler set.
  private static func running(sequential: Bool = false) -> (CommandQueueState, ConcurrentGroup) {
    var state = CommandQueueState(isSequential: sequential)
    state.onDrained = { _ in }
    let burst = ConcurrentGroup()
    _ = state.install(burst)
    _ = state.addReturned(to: burst, accepted: true, installed: true)
    return (state, burst)
  }

  /// The queue drained; its handler was handed out and has not returned: a caller waits for it.
  @Test func aCallerOfAnIdleQueueWaitsForTheHandlerOnItsWay() async {
    var (state, burst) = Self.running()
    let end = state.burstFinished(burst, failures: [Self.failure])
    #expect(end.report?.failures.count == 1 && end.waiters.isEmpty && state.reporting.count == 1)
    guard let report = end.report else { return }
    let backs = await handBacks { caller in
      let id = state.makeDrainWaiter()
      let registered = state.awaitDrain(id, caller)
      #expect(registered)
      return state.reportReturned(report.id)
    }
    #expect(backs == 1 && state.drainWaiters.isEmpty && state.reporting.isEmpty)
    // Idle with nothing on its way: at once.
    let atOnce = await handBacks { caller in
      let id = state.makeDrainWaiter()
      return state.awaitDrain(id, caller) ? [] : [caller]
    }
    #expect(atOnce == 1)
  }

  /// The caller's burst is the last one: resumed after the handler that reports it returned.
  @Test func aCallerOfTheLastBurstIsResumedAfterItsReport() async {
    var (state, burst) = Self.running()
    let backs = await handBacks { caller in
      let id = state.makeDrainWaiter()
      let registered = state.awaitDrain(id, caller)
      #expect(registered)
      let end = state.burstFinished(burst, failures: [Self.failure])
      #expect(end.waiters.isEmpty && end.report?.failures.count == 1)
      guard let report = end.report else { return [] }
      return state.reportReturned(report.id)
    }
    #expect(backs == 1)
  }

  /// The caller's burst finishes while a newer one runs: the failures so far are reported now
  /// (the newer burst is not waited for), and the queue still reports its drain later.
  @Test(arguments: [true, false])
  func aCallerWhoseBurstsFinishBesideANewerOneGetsTheFailuresReported(sequential: Bool) async {
    var (state, older) = Self.running(sequential: sequential)
    let newer = ConcurrentGroup()
    let backs = await handBacks { caller in
      Self.awaitDrain(of: &state, caller, thenCancelAndStart: newer)
      let end = state.burstFinished(older, failures: [Self.failure])
      #expect(end.waiters.isEmpty && end.report?.failures.count == 1)
      #expect((end.start === newer) == sequential)
      guard let report = end.report else { return [] }
      return state.reportReturned(report.id)
    }
    #expect(backs == 1 && state.failures.isEmpty)
    let last = state.burstFinished(newer, failures: [])
    #expect(last.report?.failures.isEmpty == true)
  }

  /// Nothing to report: the caller is resumed at once, and no handler call is made before the
  /// queue drained.
  @Test func aCallerWithNothingToReportIsResumedAtOnce() async {
    var (state, older) = Self.running()
    let newer = ConcurrentGroup()
    let backs = await handBacks { caller in
      Self.awaitDrain(of: &state, caller, thenCancelAndStart: newer)
      let end = state.burstFinished(older, failures: [])
      #expect(end.report == nil)
      return end.waiters
    }
    #expect(backs == 1)
  }

  /// A handler call begun before the caller's bursts finished (another thread's) is waited for
  /// too, whichever returns first.
  @Test func aCallerWaitsForEveryHandlerCallBegunBeforeItsBurstsFinished() async {
    var (state, first) = Self.running()
    let inFlight = state.burstFinished(first, failures: [Self.failure]).report
    let second = ConcurrentGroup()
    _ = state.install(second)
    _ = state.addReturned(to: second, accepted: true, installed: true)
    let backs = await handBacks { caller in
      let id = state.makeDrainWaiter()
      let registered = state.awaitDrain(id, caller)
      #expect(registered)
      let end = state.burstFinished(second, failures: [])
      #expect(end.waiters.isEmpty && state.reporting.count == 2)
      guard let own = end.report, let earlier = inFlight else { return [] }
      let afterOwn = state.reportReturned(own.id)
      #expect(afterOwn.isEmpty)
      return afterOwn + state.reportReturned(earlier.id)
    }
    #expect(backs == 1)
  }

  /// A caller cancelled while it waits for a handler call is handed back at once, and not again
  /// when the call returns.
  @Test func aCallerCancelledWhileItWaitsForAReportIsHandedBackOnce() async {
    var (state, burst) = Self.running()
    let report = state.burstFinished(burst, failures: []).report
    let backs = await handBacks { caller in
      let id = state.makeDrainWaiter()
      let registered = state.awaitDrain(id, caller)
      #expect(registered)
      let cancelled = state.cancelDrainWait(id)
      let afterReport = report.map { state.reportReturned($0.id) } ?? []
      #expect(afterReport.isEmpty)
      return (cancelled.map { [$0] } ?? []) + afterReport
    }
    #expect(backs == 1 && state.drainWaiters.isEmpty)
  }

  /// Without a handler, a drained queue's failures are handed out (released after the lock)
  /// and a caller does not wait.
  @Test func withoutAHandlerTheFailuresAreHandedOutToRelease() async {
    var (state, burst) = Self.running()
    state.onDrained = nil
    let backs = await handBacks { caller in
      let id = state.makeDrainWaiter()
      let registered = state.awaitDrain(id, caller)
      #expect(registered)
      let end = state.burstFinished(burst, failures: [Self.failure])
      #expect(end.report == nil && end.dropped.count == 1 && state.failures.isEmpty)
      return end.waiters
    }
    #expect(backs == 1)
  }
}
