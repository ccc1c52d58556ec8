import Testing

@testable import JobKitPostgres

/// The worker's claim decisions, fed events, without a database or threads.
@Suite struct RemoteWorkerClaimStateMachineTests {
  typealias Machine = RemoteWorkerClaimStateMachine

  @Test func anIdleWorkerClaimsAFullBatchAndMayTakeASuspect() {
    let machine = Machine(batchSize: 8, maxConcurrent: 16)
    #expect(machine.next(handlersRunning: 0, rowsHeld: 0) == .claim(limit: 8, mayTakeSuspect: true))
  }

  @Test func aBusyWorkerNeverTakesASuspect() {
    let machine = Machine(batchSize: 8, maxConcurrent: 16)
    #expect(machine.next(handlersRunning: 3, rowsHeld: 3) == .claim(limit: 8, mayTakeSuspect: false))
  }

  @Test func aSuspectRowRunsAloneUntilItsHandlerEnded() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    machine.claimed([(id: 7, suspect: true)], limit: 8)
    #expect(machine.isolated == 7)
    // Free slots do not matter: nothing else is claimed while the suspect runs.
    #expect(machine.next(handlersRunning: 1, rowsHeld: 1) == .wait)
    machine.handlerEnded(8)
    #expect(machine.next(handlersRunning: 1, rowsHeld: 1) == .wait)
    machine.handlerEnded(7)
    #expect(machine.next(handlersRunning: 0, rowsHeld: 1) == .claim(limit: 8, mayTakeSuspect: true))
  }

  @Test func aBacklogWaitsForHalfABatchOfFreeSlots() {
    var machine = Machine(batchSize: 8, maxConcurrent: 8)
    machine.claimed((1...8).map { (id: Int64($0), suspect: false) }, limit: 8)
    #expect(machine.backlog)
    #expect(machine.next(handlersRunning: 8, rowsHeld: 8) == .wait)
    #expect(machine.next(handlersRunning: 5, rowsHeld: 5) == .wait)
    #expect(machine.next(handlersRunning: 4, rowsHeld: 4) == .claim(limit: 4, mayTakeSuspect: false))
  }

  @Test func rowsBeingStoredBoundTheRowsHeld() {
    let machine = Machine(batchSize: 4, maxConcurrent: 4)
    // No handler runs, but 8 outcomes wait to be stored: maxConcurrent + batchSize rows held.
    #expect(machine.next(handlersRunning: 0, rowsHeld: 8) == .wait)
    #expect(machine.next(handlersRunning: 0, rowsHeld: 6) == .claim(limit: 2, mayTakeSuspect: true))
  }

  @Test(arguments: [(0, 0), (-3, 5)])
  func valuesBelowOneCountAsOne(batchSize: Int, maxConcurrent: Int) {
    let machine = Machine(batchSize: batchSize, maxConcurrent: maxConcurrent)
    #expect(machine.next(handlersRunning: 0, rowsHeld: 0) == .claim(limit: 1, mayTakeSuspect: true))
  }

  @Test func aClaimWithoutAnAnswerIsLookedForDuringOneLease() {
    var machine = Machine(batchSize: 8, maxConcurrent: 8)
    let start = ContinuousClock.now
    var looks = machine.looksForLostRows(now: start)
    #expect(!looks)
    machine.claimFailed(mayHaveBeenApplied: true, now: start, lease: .seconds(2))
    looks = machine.looksForLostRows(now: start + .seconds(1))
    #expect(looks)
    // Claims go on meanwhile.
    #expect(machine.next(handlersRunning: 0, rowsHeld: 0) == .claim(limit: 8, mayTakeSuspect: true))
    looks = machine.looksForLostRows(now: start + .seconds(2))
    #expect(!looks)
    looks = machine.looksForLostRows(now: start + .seconds(1))
    #expect(!looks)
  }

  @Test func aClaimTheServerRefusedTookNothing() {
    var machine = Machine(batchSize: 8, maxConcurrent: 8)
    let start = ContinuousClock.now
    machine.claimFailed(mayHaveBeenApplied: false, now: start, lease: .seconds(2))
    let looks = machine.looksForLostRows(now: start)
    #expect(!looks)
  }

  @Test func anAdoptedSuspectRunsAlone() {
    var machine = Machine(batchSize: 8, maxConcurrent: 8)
    machine.adopted([(id: 3, suspect: false), (id: 4, suspect: true)])
    #expect(machine.isolated == 4)
    #expect(machine.next(handlersRunning: 2, rowsHeld: 2) == .wait)
  }

  @Test func aShutdownStopsClaimingDrainsUntilTheGracePeriodThenHandsBack() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    machine.stop(now: start, grace: .seconds(5))
    #expect(machine.next(handlersRunning: 0, rowsHeld: 0) == .stop)
    #expect(machine.next(handlersRunning: 3, rowsHeld: 3) == .stop)
    // Draining: handlers still run within the grace period.
    #expect(machine.drain(now: start + .seconds(1), rowsHeld: 3) == .waitForHandlers(until: start + .seconds(5)))
    // A second stop does not move the deadline.
    machine.stop(now: start + .seconds(2), grace: .seconds(5))
    #expect(machine.drain(now: start + .seconds(4), rowsHeld: 1) == .waitForHandlers(until: start + .seconds(5)))
    // Handing back: the grace period is over and a handler still runs.
    #expect(machine.drain(now: start + .seconds(5), rowsHeld: 1) == .handBack)
    #expect(machine.phase == .handingBack)
    machine.handedBack()
    #expect(machine.phase == .stopped)
    #expect(machine.drain(now: start + .seconds(6), rowsHeld: 1) == .stopped)
  }

  @Test func aShutdownWithNothingHeldStopsAtOnce() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    machine.stop(now: start, grace: .seconds(30))
    #expect(machine.drain(now: start, rowsHeld: 0) == .stopped)
    #expect(machine.phase == .stopped)
  }

  @Test func aShutdownWithoutGraceHandsBackAtOnce() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    machine.stop(now: start, grace: .zero)
    #expect(machine.drain(now: start, rowsHeld: 2) == .handBack)
  }

  @Test func aShutdownsHandBackGetsWhatIsLeftOfTheGracePeriodAndTheAllowance() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    let allowance = Machine.handBackAllowance
    // Before a shutdown: a statement's own time limit.
    #expect(machine.shutdownEnd == nil)
    #expect(machine.handBackTimeLimit(now: start, statementTimeout: .seconds(10)) == .seconds(10))
    machine.stop(now: start, grace: .seconds(5))
    #expect(machine.graceEnd == start + .seconds(5))
    #expect(machine.shutdownEnd == start + .seconds(5) + allowance)
    // Early (every handler ended): the statement's own limit, when it is shorter.
    #expect(machine.handBackTimeLimit(now: start + .seconds(1), statementTimeout: .seconds(3)) == .seconds(3))
    #expect(
      machine.handBackTimeLimit(now: start + .seconds(1), statementTimeout: .seconds(10))
        == .seconds(4) + allowance)
    // At the grace end (handlers still running): the allowance.
    _ = machine.drain(now: start + .seconds(5), rowsHeld: 1)
    #expect(machine.handBackTimeLimit(now: start + .seconds(5), statementTimeout: .seconds(10)) == allowance)
    // Past the shutdown's end (the claim loop waited that long): no statement.
    #expect(machine.handBackTimeLimit(now: start + .seconds(5) + allowance, statementTimeout: .seconds(10)) == nil)
  }

  @Test func aSecondStopKeepsTheGraceEnd() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    machine.stop(now: start, grace: .seconds(5))
    machine.stop(now: start + .seconds(3), grace: .zero)
    #expect(machine.graceEnd == start + .seconds(5))
  }

  @Test func drainingWithoutAStopEndsTheGracePeriodAtOnce() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    _ = machine.drain(now: start, rowsHeld: 1)
    #expect(machine.graceEnd == start)
    #expect(machine.handBackTimeLimit(now: start, statementTimeout: .seconds(10)) == Machine.handBackAllowance)
  }

  @Test func drainingWithoutAStopBeginsAShutdownWithoutGrace() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock().now
    #expect(machine.drain(now: start, rowsHeld: 1) == .handBack)
    #expect(machine.next(handlersRunning: 0, rowsHeld: 0) == .stop)
  }

  @Test func aLookUpDoesNotRunAgainAnAttemptThatRanInTheWindow() {
    var machine = Machine(batchSize: 8, maxConcurrent: 16)
    let start = ContinuousClock.now
    machine.claimFailed(mayHaveBeenApplied: true, now: start, lease: .seconds(2))
    // A later claim's row ran (and may have ended) before a look-up that saw it reports it.
    machine.runs(5, attempt: 1)
    #expect(!machine.mayRunAdopted(5, attempt: 1))
    #expect(machine.mayRunAdopted(5, attempt: 2))
    #expect(machine.mayRunAdopted(6, attempt: 1))
    // Out of the window, nothing is remembered.
    let looks = machine.looksForLostRows(now: start + .seconds(3))
    #expect(!looks)
    machine.runs(7, attempt: 1)
    #expect(machine.mayRunAdopted(5, attempt: 1))
    #expect(machine.mayRunAdopted(7, attempt: 1))
  }
}
