import Foundation
import Testing

@testable import JobKit

@Suite("ProgressState")
struct ProgressStateTests {
  @Test func countsCostNothingToPublishUntilAProgressIsInstalled() {
    var state = ProgressState()
    let check1 = state.tracked(BlockOperation()) == nil
    #expect(check1)
    let check2 = state.tracked(BlockOperation()) == nil
    #expect(check2)
    let check3 = state.routed(BlockOperation()) == nil
    #expect(check3)
    let check4 = state.total == 2 && state.completed == 1
    #expect(check4)
    let check5 = state.nextPublication().shape == "done"
    #expect(check5)
  }

  @Test func oneThreadPublishesAndWritesTheLatestCountsUntilTheyStopChanging() {
    var state = ProgressState()
    let progress = Progress(totalUnitCount: 0)
    let (installed, publish) = state.install(progress, unrouted: [])
    #expect(installed === progress && publish)
    // The installer publishes; a change meanwhile only marks the counts dirty.
    let check6 = state.tracked(BlockOperation()) == nil
    #expect(check6)
    let check7 = state.nextPublication().shape == "write 1/0"
    #expect(check7)
    let check8 = state.tracked(BlockOperation()) == nil
    #expect(check8)
    let check9 = state.nextPublication().shape == "write 2/0"
    #expect(check9)
    let check10 = state.nextPublication().shape == "done"
    #expect(check10)
    // Idle again: the next change makes its thread the publisher.
    let check11 = state.routed(BlockOperation()) === progress
    #expect(check11)
    let check12 = state.nextPublication().shape == "write 2/1"
    #expect(check12)
    let check13 = state.nextPublication().shape == "done"
    #expect(check13)
  }

  @Test func aFinishWhileAnotherThreadPublishesIsHandedToThatThread() {
    var state = ProgressState()
    _ = state.install(Progress(totalUnitCount: 0), unrouted: [])  // this "thread" now publishes
    let now = state.finish(JobFinish(error: nil, publish: nil))
    #expect(now == nil)  // the publishing thread finishes the job
    let check14 = state.nextPublication().shape == "write 1/1"
    #expect(check14)
    let check15 = state.nextPublication().shape == "finishJob"
    #expect(check15)
    let check16 = state.nextPublication().shape == "done"
    #expect(check16)
  }

  @Test func anIdleFinishPublishesTheFinalCountsItself() {
    var state = ProgressState()
    let progress = Progress(totalUnitCount: 0)
    _ = state.install(progress, unrouted: [])
    _ = state.nextPublication()
    let check17 = state.nextPublication().shape == "done"
    #expect(check17)
    _ = state.tracked(BlockOperation())
    _ = state.nextPublication()
    _ = state.nextPublication()
    let now = state.finish(JobFinish(error: nil, publish: nil))
    #expect(now?.publish === progress)
    let check18 = state.nextPublication().shape == "write 1/1"
    #expect(check18)
    let check19 = state.fractionInputs().finished
    #expect(check19)
  }

  @Test func reportingTasksAreKeptUntilRouted() {
    final class Reporting: Operation, ProgressReporting, @unchecked Sendable {
      // @unchecked Sendable: immutable.
      let progress = Progress(totalUnitCount: 1)
    }
    var state = ProgressState()
    let early = Reporting()
    _ = state.tracked(early)
    _ = state.install(Progress(totalUnitCount: 0), unrouted: [early])
    let late = Reporting()
    _ = state.tracked(late)
    let check20 = state.fractionInputs().reporters.count == 2
    #expect(check20)
    _ = state.routed(early)
    let check21 = state.fractionInputs().reporters.map(ObjectIdentifier.init) == [ObjectIdentifier(late)]
    #expect(check21)
  }
}

@Suite("JobEventListeners")
struct JobEventListenersTests {
  @Test func nothingIsRecordedWithoutListeners() {
    var listeners = JobEventListeners()
    listeners.yield(.started)
    let check101 = !listeners.beginDelivery()
    #expect(check101)
  }

  @Test func oneThreadDeliversInOrderAndTheStreamsEndAfterTheLastEvent() async {
    var listeners = JobEventListeners()
    let (stream, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    let check22 = listeners.add(continuation) != nil
    #expect(check22)
    listeners.yield(.started)
    let check23 = listeners.beginDelivery()
    #expect(check23)
    let check201 = !listeners.beginDelivery()  // somebody delivers already
    #expect(check201)
    listeners.yield(.allTasksFinished)
    let first = listeners.nextDelivery()
    #expect(first?.events.count == 2 && first?.close == false)
    listeners.yield(.finished(error: nil))
    listeners.close()
    let check24 = listeners.add(AsyncStream.makeStream(of: JobEvent.self).continuation) == nil
    #expect(check24)
    let last = listeners.nextDelivery()
    #expect(last?.events.count == 1 && last?.close == true)
    let check25 = listeners.nextDelivery() == nil
    #expect(check25)
    let check102 = !listeners.beginDelivery()
    #expect(check102)
    continuation.finish()
    var count = 0
    for await _ in stream { count += 1 }
    #expect(count == 0)
  }
}

extension ProgressState.Publication {
  /// The publication as text, for comparisons.
  fileprivate var shape: String {
    switch self {
    case .write(let total, let completed): return "write \(total)/\(completed)"
    case .done: return "done"
    case .finishJob: return "finishJob"
    }
  }
}
