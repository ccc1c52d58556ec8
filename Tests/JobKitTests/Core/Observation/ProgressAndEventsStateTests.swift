import Foundation
import Testing

@testable import JobKit

@Suite("ProgressState")
struct ProgressStateTests {
  @Test func countsCostNothingToPublishUntilAProgressIsInstalled() {
    var state = ProgressState()
    let check1 = !state.tracked(BlockOperation())
    #expect(check1)
    let check2 = !state.tracked(BlockOperation())
    #expect(check2)
    let check3 = !state.routed(BlockOperation())
    #expect(check3)
    let check4 = state.total == 2 && state.completed == 1
    #expect(check4)
    let check5 = state.publication() == nil
    #expect(check5)
  }

  @Test func onceInstalledEveryChangeIsPublishedWithTheLatestCounts() {
    var state = ProgressState()
    let progress = Progress(totalUnitCount: 0)
    let (installed, publish) = state.install(progress, unrouted: [])
    #expect(installed === progress && publish)
    let check6 = state.tracked(BlockOperation()) && state.tracked(BlockOperation())
    #expect(check6)
    let check7 = state.routed(BlockOperation())
    #expect(check7)
    let counts = state.publication()
    #expect(counts?.progress === progress && counts?.total == 2 && counts?.completed == 1)
    let (again, publishAgain) = state.install(Progress(totalUnitCount: 0), unrouted: [])
    #expect(again === progress && !publishAgain)
  }

  @Test func aFinishCompletesEveryUnitAndAnEmptyJobShowsOneOfOne() {
    var state = ProgressState()
    let check8 = !state.finish()  // nothing installed: nothing to publish
    #expect(check8)
    _ = state.install(Progress(totalUnitCount: 0), unrouted: [])
    let counts = state.publication()
    #expect(counts?.total == 1 && counts?.completed == 1)
    let check19 = state.fractionInputs.finished
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
    let check20 = state.fractionInputs.reporters.count == 2
    #expect(check20)
    _ = state.routed(early)
    let check21 = state.fractionInputs.reporters.map(ObjectIdentifier.init) == [ObjectIdentifier(late)]
    #expect(check21)
  }
}

@Suite("JobEventListeners")
struct JobEventListenersTests {
  @Test func nothingIsRecordedWithoutListeners() {
    var state = JobState()
    state.emit(.started)
    let check101 = !state.outbox.hasEvents && state.claimDrain(on: 1) == .none
    #expect(check101)
  }

  @Test func oneThreadDeliversInOrderAndTheStreamsEndAfterTheLastEvent() async {
    var state = JobState()
    let (stream, continuation) = AsyncStream.makeStream(of: JobEvent.self)
    let check22 = state.addListener(continuation) != nil
    #expect(check22)
    state.emit(.started)
    let check23 = state.claimDrain(on: 1) == .drainer
    #expect(check23)
    let check201 = state.claimDrain(on: 2) == .none  // somebody delivers already
    #expect(check201)
    state.emit(.allTasksFinished)
    let first = state.nextDrain(on: 1)?.events
    #expect(first?.events.count == 2 && first?.close == false)
    state.emit(.finished(error: nil))
    state.listeners.close()
    let check24 = state.listeners.add(AsyncStream.makeStream(of: JobEvent.self).continuation) == nil
    #expect(check24)
    let last = state.nextDrain(on: 1)?.events
    #expect(last?.events.count == 1 && last?.close == true)
    let check25 = state.nextDrain(on: 1) == nil  // nothing left: the drainer is released
    #expect(check25)
    let check102 = state.claimDrain(on: 2) == .none && state.outbox.drainer == .idle
    #expect(check102)
    continuation.finish()
    var count = 0
    for await _ in stream { count += 1 }
    #expect(count == 0)
  }
}
