import Foundation
import Testing

@testable import JobKit

/// `TaskState` fed events by hand: each transition is taken once, from the states it names
/// only, and gives back what the task held.
@Suite("TaskState transitions")
struct TaskStateTests {
  private final class Timer: JobTimer, @unchecked Sendable {
    func cancel() {}
  }

  @Test func aFinishGivesBackTheSlotAndTheTimeoutsTimerOnce() {
    var state = TaskState.tracked
    state.wait(for: .slot, on: OperationQueue())
    let check1 = !state.takeSlot()  // in line: only admitted from it
    #expect(check1)
    let check2 = state.admitFromLine() != nil
    #expect(check2)
    let check3 = state.admitFromLine() == nil
    #expect(check3)
    let check4 = state.armTimeout()
    #expect(check4)
    let timer = Timer()
    let check5 = state.timeoutScheduled(timer)
    #expect(check5)
    #expect(state.isTimeoutArmed)
    let release = state.finish()
    #expect(release?.slot == true && release?.timer as? Timer === timer)
    let check6 = state.finish() == nil  // a second report of the finish changes nothing
    #expect(check6)
    #expect(!state.timedOut && !state.isUnfinished && state.isRegistered)
    let check7 = !state.armTimeout() && state.timeoutExpired() == nil && state.claimRetry() == nil
    #expect(check7)
    state.remove()
    #expect(!state.isRegistered)
  }

  @Test func anExpiredTimeoutMarksTheTaskTimedOutThroughItsFinish() {
    var state = TaskState.tracked
    let check8 = state.armTimeout()
    #expect(check8)
    let check9 = !state.armTimeout()  // armed once
    #expect(check9)
    let check10 = state.timeoutExpired() != nil
    #expect(check10)
    let check11 = state.timeoutExpired() == nil  // fires once
    #expect(check11)
    #expect(state.timedOut)
    let check12 = !state.timeoutScheduled(Timer())  // scheduled too late: the caller cancels it
    #expect(check12)
    let check13 = state.finish()?.timer == nil
    #expect(check13)
    #expect(state.timedOut)
  }

  @Test func aRetryWaitsThenIsClaimedOnceAndASecondFinishIsIgnored() {
    var state = TaskState.tracked
    let check14 = state.takeSlot()
    #expect(check14)
    let check15 = state.armTimeout() && state.timeoutExpired() != nil
    #expect(check15)
    let check16 = state.beginRetry()?.slot == true
    #expect(check16)
    let check17 = state.beginRetry() == nil && state.finish() == nil  // one failure, one retry
    #expect(check17)
    #expect(state.timedOut)  // the failed attempt ran past its timeout
    let check18 = !state.armTimeout()  // a failed attempt needs no timeout
    #expect(check18)
    let check19 = state.retryScheduled(Timer())
    #expect(check19)
    let check20 = !state.retryScheduled(Timer())
    #expect(check20)
    let check21 = state.claimRetry() != nil
    #expect(check21)
    let check22 = state.claimRetry() == nil
    #expect(check22)
    guard case .none = state.stop() else {
      Issue.record("a claimed retry is being replaced: nothing to stop")
      return
    }
  }

  @Test func aStopCancelsAnUnfinishedTaskAndFinishesAPendingRetry() {
    var running = TaskState.tracked
    let check23 = running.armTimeout()
    #expect(check23)
    let timer = Timer()
    let check24 = running.timeoutScheduled(timer)
    #expect(check24)
    guard case .cancel(let disarmed) = running.stop(), disarmed?.timer as? Timer === timer else {
      Issue.record("expected the task cancelled and its timeout disarmed")
      return
    }
    #expect(!running.isTimeoutArmed && running.isUnfinished)

    var waiting = TaskState.tracked
    _ = waiting.beginRetry()
    let delay = Timer()
    let check25 = waiting.retryScheduled(delay)
    #expect(check25)
    guard case .finishedRetry(let cancelled) = waiting.stop(), cancelled?.timer as? Timer === delay else {
      Issue.record("expected the retry ended")
      return
    }
    guard case .finished(timedOut: false, report: nil) = waiting else {
      Issue.record("expected finished")
      return
    }
    let check26 = waiting.claimRetry() == nil  // the delay's timer fires too late: no next attempt
    #expect(check26)
  }

  @Test func aTaskInLineTakesASlotWithItsQueueAndKeepsItsTimeout() {
    var state = TaskState.tracked
    let check27 = state.armTimeout()
    #expect(check27)
    let queue = OperationQueue()
    state.wait(for: .slot, on: queue)
    let check28 = state.admitFromLine() === queue
    #expect(check28)
    #expect(state.isTimeoutArmed)
    guard case .unfinished(.holding, .armed) = state else {
      Issue.record("expected a held slot with the timeout still armed")
      return
    }
  }

  /// A task held back by its job's suspension keeps its queue and timeout, takes no slot and
  /// does not join a line until the hold ends; a finished task is no longer held.
  @Test func aTaskHeldBackBySuspensionKeepsItsQueueUntilTheHoldEnds() {
    var state = TaskState.tracked
    let check29 = state.armTimeout()
    #expect(check29)
    let queue = OperationQueue()
    let check30 = state.wait(for: .resume, on: queue) && !state.wait(for: .resume, on: queue)
    #expect(check30)
    let check31 = !state.takeSlot() && state.admitFromLine() == nil  // held: no slot, no line
    #expect(check31)
    #expect(state.isUnfinished && state.isTimeoutArmed)
    let check32 = state.stopWaiting(for: .resume) === queue && state.stopWaiting(for: .resume) == nil
    #expect(check32)
    guard case .unfinished(.none, .armed) = state else {
      Issue.record("expected no slot with the timeout still armed")
      return
    }
    let check33 = state.wait(for: .resume, on: queue) && state.finish()?.slot == false
    #expect(check33)
    let check34 = state.stopWaiting(for: .resume) == nil  // finished while held: not queued by the resume
    #expect(check34)
  }
}
