import Foundation
import JobKitTesting
import Testing

@testable import JobKit

@Suite("JobTimeline marks where a time limit ran out")
struct TimeLimitTimelineTests {
  /// The job's track gets a `timeLimitReached` marker at the moment its limit ran out: after the
  /// clock was told to advance, before the advance returned, so before the stopped task (which
  /// ignores its cancel) finished. The nested job that the stop cancelled gets none (its own,
  /// longer limit never ran out). The stopped tasks' slices, and the nested job's track, carry
  /// the limit as their error.
  @Test func theMomentTheLimitRanOutIsMarkedOnItsJobsTrack() async throws {
    let clock = ManualClock()
    let slow = ManualTask("slow", finishesOnCancel: false)
    let deep = ManualTask("deep")
    let nested = ScriptedJob { $0.trackAndQueue(deep) }
    nested.name = "nested"
    nested.clock = clock
    nested.timeLimit = .seconds(10)
    let job = ScriptedJob { job in
      job.trackAndQueue(slow)
      job.trackAndQueue(nested)
    }
    job.clock = clock
    job.timeLimit = .seconds(2)
    let timeline = JobTimeline()
    timeline.record(job)
    job.startJob()
    #expect(await slow.startedLatch.waitOpen())
    #expect(await deep.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(2))
    let before = ContinuousClock.now
    clock.advance(by: .seconds(2))
    let after = ContinuousClock.now
    #expect(job.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
    slow.finish()
    #expect(await timeline.recorded())

    let layout = timeline.layout()
    let origin = try #require(layout.origin)
    #expect(layout.tracks.map(\.name) == ["ScriptedJob", "nested"])
    let track = layout.tracks[0]
    let marker = try #require(track.markers.first { $0.kind == .timeLimitReached })
    #expect(marker.at >= (before - origin).seconds - 1e-9)
    #expect(marker.at <= (after - origin).seconds + 1e-9)
    let slowSlice = try #require(track.slices.first { $0.task == "slow" })
    #expect(marker.at <= slowSlice.end + 1e-9)
    #expect(marker.at <= track.end + 1e-9)
    #expect(!layout.tracks[1].markers.contains { $0.kind == .timeLimitReached })
    guard case .failed(let reason) = slowSlice.outcome else {
      Issue.record("the stopped task's slice is \(slowSlice.outcome), not failed with the limit")
      return
    }
    #expect(reason.contains("timeLimitExceeded"))
    guard case .failed(let jobError)? = track.outcome else {
      Issue.record("the job's track ended \(String(describing: track.outcome))")
      return
    }
    #expect(jobError.contains("timeLimitExceeded"))
    // The nested job the stop cancelled ends with the limit as its reason too.
    guard case .failed(let nestedReason)? = layout.tracks[1].outcome else {
      Issue.record("the nested job's track ended \(String(describing: layout.tracks[1].outcome))")
      return
    }
    #expect(nestedReason.contains("timeLimitExceeded"))

    let json = timeline.traceEventJSON()
    _ = try validatedTraceEvents(json)
    let text = String(decoding: json, as: UTF8.self)
    #expect(text.components(separatedBy: "\"timeLimitReached\"").count - 1 == 1)
    let html = timeline.html()
    #expect(html.components(separatedBy: "<rect class=\"limit\"").count - 1 == 1)
    #expect(html.contains("time limit ran out at"))
  }

  @Test func aJobThatFinishesInTimeHasNoMarker() async throws {
    let clock = ManualClock()
    let job = ScriptedJob { $0.trackAndQueue(InstantTask()) }
    job.clock = clock
    job.timeLimit = .seconds(1)
    let timeline = JobTimeline()
    timeline.record(job)
    try await job.run()
    #expect(await timeline.recorded())
    clock.advance(by: .seconds(5))
    #expect(timeline.layout().tracks.allSatisfy { $0.markers.allSatisfy { $0.kind != .timeLimitReached } })
    #expect(!timeline.html().contains("class=\"limit\""))
  }
}
