import Testing

@testable import JobKit

/// `JobPhase` fed events one by one, no threads: each transition's result and the phase after it.
@Suite("JobPhase")
struct JobPhaseTests {
  @Test func anOperationIsQueuedOnceAndNeverAfterItStarted() {
    // Submission is the operation's queue claim (shared by startJob, run() and trackAndQueue).
    var state = OperationState()
    let first = state.claimQueue()
    let second = state.claimQueue()
    #expect(first && !second)
    var started = OperationState()
    _ = started.start()
    let afterStart = started.claimQueue()
    #expect(!afterStart)
    #expect(JobPhase.initial.summary(queued: true) == "submitted")
    #expect(JobPhase.initial.summary(queued: false) == "created")
  }

  /// The record a pipeline's checkpoint reads: a cancel counts from the moment `cancel()`
  /// recorded it, also while its delivery waits for `operationStart()` to return (issue 23).
  @Test func aCancelIsRecordedInEveryPhaseBeforeTheFinish() {
    var idle = OperationState()
    _ = idle.cancel()
    var starting = OperationState()
    _ = starting.start()
    let beforeCancel = starting.isCancelRecorded
    _ = starting.cancel()
    var running = OperationState()
    _ = running.start()
    _ = running.operationStartReturned()
    _ = running.cancel()
    #expect(!beforeCancel && idle.isCancelRecorded && starting.isCancelRecorded && running.isCancelRecorded)
  }

  @Test func aCancelBeforeTheStartIsRememberedByTheOperation() {
    var state = OperationState()
    guard case .none = state.cancel() else {
      Issue.record("a cancel before the start asked for a delivery")
      return
    }
    // `start()` read `isCancelled` before the cancel: the state still knows.
    guard case .skipCancelled = state.start() else {
      Issue.record("a cancel before the start was lost")
      return
    }
  }

  @Test func mainRunsUnlessTheJobStoppedFirstAndOnlyOnce() {
    var running = JobPhase.initial
    let check3 = running.beginMain(on: 7)
    #expect(check3)
    let check4 = running.isRunningMain
    #expect(check4)
    let check102 = !running.beginMain(on: 8)
    #expect(check102)

    var stopped = JobPhase.initial
    let check5 = stopped.recordStop(.cancelled(reason: nil))
    #expect(check5)
    let check103 = !stopped.beginMain(on: 7)
    #expect(check103)
    let check6 = stopped.isStopping
    #expect(check6)
    let check7 = stopped.summary(queued: true) == "runningMain, cancelled"
    #expect(check7)
  }

  @Test func theFirstStopReasonWinsAndAFinishedJobTakesNone() {
    var phase = JobPhase.initial
    let check8 = phase.recordStop(.failed(TestError(1)))
    #expect(check8)
    let check104 = !phase.recordStop(.cancelled(reason: nil))
    #expect(check104)
    guard case .failed(let error as TestError)? = phase.stop else {
      Issue.record("expected the failure to stand")
      return
    }
    #expect(error == TestError(1))
    phase.finish()
    let check105 = !phase.recordStop(.cancelled(reason: nil))
    #expect(check105)
    let check9 = phase.stop == nil && phase.isFinished
    #expect(check9)
  }

  @Test func nothingRoutesBeforeTheStartThenOnlyMainsTrackCallsThenAnyThread() {
    var phase = JobPhase.initial
    let check201 = !phase.routes(for: 1, inTrack: true) && !phase.hasMainReturned  // not started
    #expect(check201)
    _ = phase.beginMain(on: 1)
    let check202 = !phase.routes(for: 2, inTrack: true)  // another thread, while main() runs
    #expect(check202)
    let check203 = !phase.routes(for: 1, inTrack: false)  // main's thread, outside a track call
    #expect(check203)
    let check10 = phase.routes(for: 1, inTrack: true) && !phase.hasMainReturned
    #expect(check10)
    phase.mainReturned()
    let check106 = phase.routes(for: 2, inTrack: false) && phase.hasMainReturned
    #expect(check106)
    phase.finish()
    let check107 = !phase.routes(for: 1, inTrack: true) && !phase.hasMainReturned
    #expect(check107)
  }

  @Test func aStopKeepsThePhase() {
    var phase = JobPhase.initial
    _ = phase.beginMain(on: 1)
    phase.mainReturned()
    let check14 = phase.recordStop(.cancelled(reason: nil))
    #expect(check14)
    let check15 = phase.hasMainReturned
    #expect(check15)
    let check16 = phase.summary(queued: true) == "routing, cancelled"
    #expect(check16)
  }
}
