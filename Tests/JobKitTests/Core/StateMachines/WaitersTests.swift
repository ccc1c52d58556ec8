import Testing

@testable import JobKit

/// `Waiters` fed its steps one by one on one thread: each continuation is handed back exactly
/// once, whichever comes first of a release and a cancel, also when the cancel comes before the
/// registration. The continuations are real ones, which the registry only stores and hands back.
@Suite("Waiters")
struct WaitersTests {
  /// Gives `body` a real continuation and resumes it once with what `body` hands back (each
  /// hand-back counted; if none was, it is resumed anyway, so a wrong transition fails, not hangs).
  private func handBacks(_ body: (CheckedContinuation<Int, Never>) -> [CheckedContinuation<Int, Never>]) async
    -> Int
  {
    var count = 0
    _ = await withCheckedContinuation { (waiter: CheckedContinuation<Int, Never>) in
      let back = body(waiter)
      count = back.count
      (back.first ?? waiter).resume(returning: 0)
    }
    return count
  }

  @Test func aRegisteredWaiterIsReleasedOnceItsConditionIsMet() async {
    var waiters = Waiters<Int, Int>()
    let backs = await handBacks { waiter in
      let id = waiters.makeWaiter()
      let registered = waiters.register(id, waitingFor: 2, waiter)
      #expect(registered)
      #expect(waiters.hasRegistered)
      // Each event counts the condition down; the waiter leaves at zero.
      let first = waiters.advance { $0 > 1 ? $0 - 1 : nil }
      #expect(first.isEmpty)
      let released = waiters.advance { $0 > 1 ? $0 - 1 : nil }
      let after = waiters.advance { _ in nil }
      #expect(after.isEmpty)
      return released
    }
    #expect(backs == 1 && waiters.isEmpty && !waiters.hasRegistered)
  }

  @Test func aCancelAfterTheRegistrationHandsTheContinuationBackOnce() async {
    var waiters = Waiters<Void, Int>()
    let backs = await handBacks { waiter in
      let id = waiters.makeWaiter()
      let registered = waiters.register(id, waitingFor: (), waiter)
      #expect(registered)
      let cancelled = waiters.cancel(id)
      let again = waiters.cancel(id)
      let rest = waiters.releaseAll()
      #expect(again == nil && rest.isEmpty)
      return cancelled.map { [$0] } ?? []
    }
    #expect(backs == 1 && waiters.isEmpty)
  }

  @Test func aCancelBeforeTheRegistrationMakesItRefuse() async {
    var waiters = Waiters<Void, Int>()
    let backs = await handBacks { waiter in
      let id = waiters.makeWaiter()
      let early = waiters.cancel(id)
      #expect(early == nil)
      // Refused: the caller resumes it itself (the helper does, counting no hand-back).
      let registered = waiters.register(id, waitingFor: (), waiter)
      #expect(!registered)
      return waiters.releaseAll()
    }
    #expect(backs == 0 && waiters.isEmpty)
  }

  @Test func aRemovedWaiterIsForgottenAndLaterStepsForItDoNothing() {
    var waiters = Waiters<Void, Int>()
    let id = waiters.makeWaiter()
    #expect(!waiters.isEmpty && !waiters.hasRegistered)
    waiters.remove(id)
    let cancelled = waiters.cancel(id)
    #expect(waiters.isEmpty && cancelled == nil && waiters.isEmpty)
  }

  @Test func releaseAllReleasesOnlyTheRegisteredOnes() async {
    var waiters = Waiters<Void, Int>()
    var pendingID: UInt64 = 0
    let backs = await handBacks { waiter in
      pendingID = waiters.makeWaiter()
      let id = waiters.makeWaiter()
      let registered = waiters.register(id, waitingFor: (), waiter)
      #expect(registered)
      return waiters.releaseAll()
    }
    #expect(backs == 1 && !waiters.isEmpty)
    waiters.remove(pendingID)
    #expect(waiters.isEmpty)
  }
}
