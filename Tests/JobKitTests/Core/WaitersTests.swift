import Foundation
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

  /// A registry shared by the waiting tasks of one test, and what each was resumed with.
  private final class Shared: @unchecked Sendable {
    // @unchecked Sendable: every field is touched with `lock` held.
    private let lock = NSLock()
    private var waiters = Waiters<Void, Int>()
    private var received: [Int: Int] = [:]

    func register(_ continuation: CheckedContinuation<Int, Never>) {
      lock.withLock {
        let id = waiters.makeWaiter()
        _ = waiters.register(id, waitingFor: (), continuation)
      }
    }

    func releaseAll() -> [CheckedContinuation<Int, Never>] { lock.withLock { waiters.releaseAll() } }

    func record(_ value: Int, for index: Int) { lock.withLock { received[index] = value } }

    var values: [Int: Int] { lock.withLock { received } }
  }

  @Test func waitersAreReleasedOldestFirst() async {
    let shared = Shared()
    await withTaskGroup(of: Void.self) { tasks in
      // Registered one after the other: task `index` is the `index`th waiter.
      for index in 0..<5 {
        await withCheckedContinuation { (registered: CheckedContinuation<Void, Never>) in
          tasks.addTask {
            let value = await withCheckedContinuation { (waiter: CheckedContinuation<Int, Never>) in
              shared.register(waiter)
              registered.resume()
            }
            shared.record(value, for: index)
          }
        }
      }
      // Each is resumed with its place in the release.
      for (place, continuation) in shared.releaseAll().enumerated() {
        continuation.resume(returning: place)
      }
    }
    #expect(shared.values == [0: 0, 1: 1, 2: 2, 3: 3, 4: 4])
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
