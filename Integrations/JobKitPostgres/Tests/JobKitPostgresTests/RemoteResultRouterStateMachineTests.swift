import Testing

@testable import JobKitPostgres

/// The result router's decisions, fed events, without a database or threads: waiters are
/// plain strings, time is instants passed in.
@Suite struct RemoteResultRouterStateMachineTests {
  typealias Machine = RemoteResultRouterStateMachine<String>
  let start = ContinuousClock().now

  func makeMachine() -> Machine {
    Machine(pollInterval: .seconds(1), reconnectTimeout: .seconds(10))
  }

  @Test func withoutADriverAWaiterPollsItself() {
    var machine = makeMachine()
    let driven = machine.register(id: 1, token: 1, waiter: "a")
    #expect(!driven)
  }

  @Test func aDriverLooksUpEveryWaitedIdAtItsStartThenOnlyTheNotifiedOnes() {
    var machine = makeMachine()
    _ = machine.register(id: 1, token: 1, waiter: "a")
    machine.driverStarted(now: start)
    let driven = machine.register(id: 2, token: 2, waiter: "b")
    #expect(driven)
    #expect(Set(machine.nextLookUp(now: start)) == [1, 2])
    // Waiting: nothing notified, no full check due.
    #expect(machine.nextLookUp(now: start + .milliseconds(10)).isEmpty)
    // Notified: only that id.
    let waited = machine.notified(2)
    let unknown = machine.notified(3)
    #expect(waited)
    #expect(!unknown)
    #expect(machine.nextLookUp(now: start + .milliseconds(20)) == [2])
  }

  @Test func pollingLooksUpEveryWaitedIdEachPollInterval() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.register(id: 2, token: 2, waiter: "b")
    _ = machine.nextLookUp(now: start)
    #expect(machine.idleWait(now: start + .milliseconds(400)) == .milliseconds(600))
    #expect(machine.nextLookUp(now: start + .milliseconds(500)).isEmpty)
    #expect(Set(machine.nextLookUp(now: start + .seconds(1))) == [1, 2])
  }

  @Test func anIdleDriverWaitsAPollIntervalNotZero() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    #expect(machine.nextLookUp(now: start).isEmpty)
    #expect(machine.idleWait(now: start) == .seconds(1))
  }

  @Test func aReconnectedListenLooksUpEverything() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.nextLookUp(now: start)
    machine.listening()
    #expect(machine.nextLookUp(now: start + .milliseconds(1)) == [1])
  }

  @Test func foundRowsResumeEveryWaiterOfTheirIdOnce() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.register(id: 1, token: 2, waiter: "b")
    _ = machine.register(id: 2, token: 3, waiter: "c")
    let resumed = machine.found([(Int64(1), "row1")], now: start)
    #expect(Set(resumed.map { "\($0.0)=\($0.1)" }) == ["a=row1", "b=row1"])
    #expect(machine.found([(Int64(1), "row1")], now: start).isEmpty)
    #expect(!machine.isEmpty)
  }

  @Test func rowsANotificationCarriesResumeTheirWaitersAndTheirIdsAreNotLookedUp() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.register(id: 2, token: 2, waiter: "b")
    _ = machine.nextLookUp(now: start)
    let resumed = machine.delivered([(Int64(1), "row1"), (Int64(3), "row3")])
    #expect(resumed.map { "\($0.0)=\($0.1)" } == ["a=row1"])
    // The trigger's notification of the same id, after the rows: nothing to look up.
    let waited = machine.notified(1)
    #expect(!waited)
    #expect(machine.nextLookUp(now: start + .milliseconds(10)).isEmpty)
    #expect(machine.delivered([(Int64(1), "row1")]).isEmpty)
    #expect(!machine.isEmpty)
  }

  @Test func aCancelledWaiterIsRemovedAndNotResumedLater() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    let first = machine.remove(id: 1, token: 1)
    let second = machine.remove(id: 1, token: 1)
    #expect(first == "a")
    #expect(second == nil)
    #expect(machine.found([(Int64(1), "row")], now: start).isEmpty)
    #expect(machine.isEmpty)
  }

  @Test func reconnectingRetriesThenGivesUpAfterTheReconnectTimeout() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.nextLookUp(now: start)
    guard case .retry = machine.lookUpFailed(unreachable: true, now: start + .seconds(9)) else {
      Issue.record("retried before the reconnect timeout")
      return
    }
    // A failure sends the next look-up to every waited id.
    #expect(machine.nextLookUp(now: start + .seconds(9) + .milliseconds(1)) == [1])
    guard
      case .giveUp(let waiters, let unreachableFor) = machine.lookUpFailed(
        unreachable: true, now: start + .seconds(10))
    else {
      Issue.record("no give-up after the reconnect timeout")
      return
    }
    #expect(waiters == ["a"])
    #expect(unreachableFor == .seconds(10))
    #expect(machine.isEmpty)
  }

  @Test func aRefusedLookUpIsRetriedWithoutGivingUp() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    guard case .retry = machine.lookUpFailed(unreachable: false, now: start + .seconds(60)) else {
      Issue.record("a refused look-up gave up")
      return
    }
  }

  @Test func aSuccessfulLookUpRestartsTheReconnectTimeout() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.found([(Int64, String)](), now: start + .seconds(8))
    guard case .retry = machine.lookUpFailed(unreachable: true, now: start + .seconds(12)) else {
      Issue.record("gave up though the database answered 4 s ago")
      return
    }
  }

  @Test func aStoppedDriverHandsItsWaitersToPolling() {
    var machine = makeMachine()
    machine.driverStarted(now: start)
    _ = machine.register(id: 1, token: 1, waiter: "a")
    _ = machine.register(id: 2, token: 2, waiter: "b")
    #expect(Set(machine.driverStopped()) == ["a", "b"])
    #expect(machine.isEmpty)
    let drivenAfterStop = machine.register(id: 3, token: 3, waiter: "c")
    #expect(!drivenAfterStop)
  }
}
