import Testing

@testable import JobKitPostgres

/// The loops' wake-up: a signal is kept for the next wait, and a wait's timer never outlives it.
@Suite struct WakeSignalTests {
  @Test func aSignalBeforeTheWaitEndsIt() async {
    let wake = WakeSignal()
    wake.signal()
    #expect(wake.isPending)
    await wake.wait(timeout: .seconds(600))
    #expect(!wake.isPending)
  }

  @Test func aWaitEndedBySignalLeavesNoSignalForTheNextWait() async {
    let wake = WakeSignal()
    for _ in 0..<100 {
      wake.signal()
      await wake.wait(timeout: .seconds(600))
      // The ended wait's timer is over: had it signalled, the next wait would end at once and
      // a loop waiting on it would spin.
      #expect(!wake.isPending)
    }
  }

  @Test func aSignalWhileWaitingEndsTheWait() async {
    let wake = WakeSignal()
    let waiting = Task { await wake.wait(timeout: .seconds(600)) }
    // Signals until the waiter took one: each signal either ends the wait or is kept for it.
    wake.signal()
    await waiting.value
    #expect(!wake.isPending)
  }

  @Test func aTimeoutEndsTheWaitWithoutASignal() async {
    let wake = WakeSignal()
    await wake.wait(timeout: .milliseconds(1))
    #expect(!wake.isPending)
  }

  @Test func cancellingTheWaitingTaskEndsTheWait() async {
    let wake = WakeSignal()
    let waiting = Task { await wake.wait(timeout: .seconds(600)) }
    waiting.cancel()
    await waiting.value
    #expect(!wake.isPending)
  }
}
