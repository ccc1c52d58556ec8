import Testing

@testable import JobKitPostgres

/// The loops' wake-up: a signal is kept for the next wait, many are one, and a wait ends at its
/// timeout or its task's cancel. Each test has a time limit: a wait that never ends fails it.
@Suite(.timeLimit(.minutes(1))) struct WakeSignalTests {
  @Test func aSignalBeforeTheWaitEndsIt() async {
    let wake = WakeSignal()
    wake.signal()
    await wake.wait(timeout: nil)
  }

  @Test func aSignalBeforeATimedWaitEndsIt() async {
    let wake = WakeSignal()
    wake.signal()
    await wake.wait(timeout: .seconds(3_600))
  }

  @Test func aSignalWhileWaitingEndsTheWait() async {
    let wake = WakeSignal()
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await wake.wait(timeout: .seconds(3_600)) }
      // Each signal either ends the wait or is kept for it.
      wake.signal()
    }
  }

  @Test func manySignalsBeforeAWaitAreOneWakeUpThatEndsOneWait() async {
    let wake = WakeSignal()
    for _ in 0..<100 { wake.signal() }
    await wake.wait(timeout: nil)
    // Nothing is left: the next wait ends at the next signal, sent once it waits (signals
    // until then would be kept for it, which this test cannot tell apart).
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await wake.wait(timeout: nil) }
      wake.signal()
    }
  }

  @Test func aTimeoutEndsTheWaitWithoutASignal() async {
    let wake = WakeSignal()
    await wake.wait(timeout: .milliseconds(1))
  }

  @Test func aWaitEndedBySignalLeavesItsTimerNothingToDo() async {
    let wake = WakeSignal()
    for _ in 0..<100 {
      wake.signal()
      await wake.wait(timeout: .seconds(3_600))
    }
  }

  @Test func cancellingTheWaitingTaskEndsTheWait() async {
    let wake = WakeSignal()
    let waiting = Task { await wake.wait(timeout: .seconds(3_600)) }
    waiting.cancel()
    await waiting.value
    let untimed = Task { await wake.wait(timeout: nil) }
    untimed.cancel()
    await untimed.value
  }
}
