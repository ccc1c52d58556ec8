import Testing

@testable import JobKitPostgres

/// A durable job's scope without a database: scoped keys and the waits that free its slot.
@Suite struct DurableScopeTests {
  final class Waits: @unchecked Sendable {
    // @unchecked Sendable: `changes` is written by the scope's callback, read after the awaits.
    var changes: [Bool] = []
  }

  @Test func aChildKeyIsScopedByItsParentsKey() throws {
    let scope = DurableScope(rowID: 1, key: "parent") { _ in }
    #expect(try scope.scopedKey("c0") == "parent\u{1F}c0")
    let other = DurableScope(rowID: 2, key: "other") { _ in }
    let mine = try scope.scopedKey("c0")
    let theirs = try other.scopedKey("c0")
    #expect(mine != theirs)
  }

  @Test func aChildKeyWithTheSeparatorIsRefused() {
    let scope = DurableScope(rowID: 1, key: "parent") { _ in }
    #expect(throws: RemoteQueueError(.invalidKey, message: "")) { try scope.scopedKey("a\u{1F}b") }
  }

  @Test func nestedWaitsAreOneWaitOfTheHandler() async {
    let waits = Waits()
    let scope = DurableScope(rowID: 1, key: "parent") { waits.changes.append($0) }
    await scope.waiting {
      await scope.waiting { #expect(waits.changes == [true]) }
      #expect(waits.changes == [true])
    }
    #expect(waits.changes == [true, false])
    await #expect(throws: CancellationError.self) {
      try await scope.waiting { throw CancellationError() }
    }
    #expect(waits.changes == [true, false, true, false])
    #expect(!scope.isAbandoned)
    scope.abandon()
    #expect(scope.isAbandoned)
  }

  @Test func theLeaseIsHeldUntilItsLastRenewalAndNeverOnceAbandoned() async throws {
    let start = ContinuousClock.now
    let scope = DurableScope(rowID: 1, key: "parent") { _ in }
    #expect(scope.holdsLease(at: start))
    scope.leaseHeld(until: start + .seconds(2))
    #expect(scope.holdsLease(at: start + .seconds(1)))
    #expect(!scope.holdsLease(at: start + .seconds(3)))
    // An older renewal's answer never moves the end back.
    scope.leaseHeld(until: start + .seconds(1))
    #expect(scope.holdsLease(at: start + .milliseconds(1_500)))
    scope.leaseHeld(until: start + .seconds(4))
    #expect(scope.holdsLease(at: start + .seconds(3)))
    scope.abandon()
    #expect(!scope.holdsLease(at: start))
    await #expect(throws: CancellationError.self) { try await scope.waitForLease() }
  }

  @Test func theHandlersJobsCountTheTimeUsedTheirNestedJobsDoNot() throws {
    let first = DurableScope(rowID: 1, key: "parent") { _ in }
    #expect(first.timeAlreadyUsed == .zero)
    #expect(first.handedDown === first)
    let waits = Waits()
    let rerun = DurableScope(rowID: 1, key: "parent", timeAlreadyUsed: .seconds(5)) { waits.changes.append($0) }
    #expect(rerun.timeAlreadyUsed == .seconds(5))
    let twin = try #require(rerun.handedDown as? DurableScope)
    #expect(twin !== rerun)
    #expect(twin.timeAlreadyUsed == .zero)
    #expect(twin.handedDown === twin)
    #expect(twin.rowID == 1)
    #expect(try twin.scopedKey("c") == rerun.scopedKey("c"))
    // One row: the twin shares its waits, its lease and its abandonment.
    twin.abandon()
    #expect(rerun.isAbandoned)
  }
}
