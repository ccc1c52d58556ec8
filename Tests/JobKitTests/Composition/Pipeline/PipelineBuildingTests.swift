import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// BlockSequence's first example calls `then` several times on one value; a pipeline's `name`
/// is kept while it is built.
@Suite("Pipeline building", .timeLimit(.minutes(1)))
struct PipelineBuildingTests {
  @Test func thenSeveralTimesOnOneValueAppendsEachStepInOrder() async throws {
    let log = EventLog()
    let sequence = Pipeline.start { () -> String in
      log.record("1")
      return "1st result"
    }
    sequence.then { object in
      log.record("2 got \(object)")
      return "2nd result"
    }
    sequence.then { object in
      log.record("3 got \(object)")
      return "3rd result"
    }
    let done = Latch()
    let last = Locked<String?>(nil)
    sequence.finally { object in
      last.mutate { $0 = object }
      done.open()
    }
    #expect(await done.waitOpen())
    #expect(log.all == ["1", "2 got 1st result", "3 got 2nd result"])
    #expect(last.value == "3rd result")
  }

  @Test func aSameTypeThenReturnsTheSamePipelineAndATypeChangeANewOne() async throws {
    let start = Pipeline.start { 1 }
    let same = start.then { $0 + 1 }
    #expect(same === start)
    let text = start.then { "\($0)" }
    #expect(try await text.run() == "2")
    // `start` handed its steps to `text`: it is a spent builder now, and so is what builds on it.
    await #expect(throws: JobKitError(.spentBuilder)) { try await start.then { $0 + 1 }.run() }
  }

  @Test func aSameTypeThenStopsAfterAFailingStepAndSkipsTheRest() async throws {
    let log = EventLog()
    let sequence = Pipeline.start { 1 }.onError { error in log.record("error \(error)") }
    sequence.then { _ in throw TestError(7) }
    sequence.then { value in
      log.record("not reached")
      return value
    }
    await #expect(throws: TestError(7)) { try await sequence.run() }
    #expect(log.all == ["error TestError(id: 7)"])
  }

  @Test func theNameIsKeptWhileBuildingAndShowsInItsJobsEvents() async throws {
    let sequence = Pipeline.start { 1 }
    sequence.name = "MyTestSequence"
    sequence.then { $0 + 1 }
    let words = sequence.then { "\($0)" }.then { [$0] }
    #expect(sequence.name == "MyTestSequence")
    #expect(words.name == "MyTestSequence")
    let job = ScriptedJob { job in job.trackAndQueue(words) }
    let recorder = JobRecorder(job)
    try await job.run()
    let tracked = await recorder.events().compactMap { event -> String? in
      if case .taskTracked(let task, _, _) = event { return task }
      return nil
    }
    #expect(tracked == ["MyTestSequence"])
    #expect(words.result == ["2"])
  }
}
