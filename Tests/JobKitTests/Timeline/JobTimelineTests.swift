import Foundation
import JobKitTesting
import Testing

@testable import JobKit

extension JobTimeline {
  /// Waits for the recording, at most `seconds`; `false` if it did not end by then.
  func recorded(within seconds: Double = 30) async -> Bool {
    let done = Latch()
    Task {
      await waitUntilRecorded()
      done.open()
    }
    return await done.waitOpen(timeout: seconds)
  }
}

@Suite("JobTimeline")
struct JobTimelineTests {
  @Test func recordsAJobItsNestedJobsAndTheirOutcomes() async throws {
    let inner = ConcurrentGroup([named(InstantTask(), "c1"), named(InstantTask(), "c2")])
    inner.name = "inner"
    let outer = SequentialGroup([inner, named(InstantTask(), "s1")])
    let job = ScriptedJob { job in
      job.trackAndQueue(named(InstantTask(), "ok"))
      job.trackAndQueue(named(InstantTask(failure: TestError(7)), "broken"))
      job.trackAndQueue(named(InstantTask(failure: CancellationError()), "stopped"))
      job.trackAndQueue(outer)
    }
    let timeline = JobTimeline()
    timeline.record(job)
    job.startJob()
    #expect(await timeline.recorded())

    let layout = timeline.layout()
    #expect(layout.tracks.map(\.name) == ["ScriptedJob", "SequentialGroup", "inner"])
    #expect(layout.tracks.map(\.depth) == [0, 1, 2])
    #expect(layout.tracks.allSatisfy { $0.outcome == .succeeded })
    let root = layout.tracks[0].slices
    #expect(Set(root.map(\.task)) == ["ok", "broken", "stopped", "SequentialGroup"])
    #expect(root.first { $0.task == "broken" }?.outcome == .failed(String(describing: TestError(7))))
    #expect(root.first { $0.task == "stopped" }?.outcome == .cancelled)
    #expect(root.first { $0.task == "SequentialGroup" }?.nestedJob == layout.tracks[1].id)
    #expect(Set(layout.tracks[1].slices.map(\.task)) == ["inner", "s1"])
    #expect(layout.tracks[1].slices.first { $0.task == "inner" }?.nestedJob == layout.tracks[2].id)
    #expect(Set(layout.tracks[2].slices.map(\.task)) == ["c1", "c2"])
    // Every slice lies within its job's run, and nested jobs within their parents' slices.
    for track in layout.tracks {
      #expect(track.begin >= 0 && track.begin <= track.end)
      for slice in track.slices {
        #expect(slice.duration >= 0)
        #expect(slice.begin >= 0 && slice.end <= layout.span + 1e-9)
      }
    }

    let events = try validatedTraceEvents(timeline.traceEventJSON())
    #expect(events.filter { $0.ph == "X" && $0.cat != "job" }.count == 8)
    #expect(Set(events.filter { $0.ph == "X" }.map(\.pid)) == [1, 2, 3])
    let html = timeline.html()
    #expect(html.contains("ScriptedJob timeline"))
    #expect(html.components(separatedBy: "<rect class=\"task").count - 1 == 8)
  }

  @Test func aCancelledJobAndItsCancelledNestedJobAreMarked() async throws {
    let running = ManualTask("running", finishesOnCancel: true)
    let nested = SequentialGroup([running])
    let job = ScriptedJob { job in job.trackAndQueue(nested) }
    let timeline = JobTimeline()
    timeline.record(job)
    job.startJob()
    #expect(await running.startedLatch.waitOpen())
    job.cancel()
    #expect(await timeline.recorded())
    let layout = timeline.layout()
    #expect(layout.tracks.map(\.outcome) == [.cancelled, .cancelled])
    #expect(layout.tracks[0].slices.map(\.outcome) == [.cancelled])
    #expect(TimelineHTMLWriter.html(for: layout, title: nil).contains("class=\"task cancelled\""))
  }

  @Test func aTimelineWithNothingRecordedEndsAtOnceAndAJobRecordedLateIsDrawnFromThen() async throws {
    let timeline = JobTimeline()
    #expect(await timeline.recorded())
    let gate = ManualTask("gate")
    let job = ScriptedJob { job in
      job.trackAndQueue(gate) { _ in job.trackAndQueue(named(InstantTask(), "after")) }
    }
    job.startJob()
    #expect(await gate.startedLatch.waitOpen())
    timeline.record(job)
    gate.finish()
    #expect(await timeline.recorded())
    let track = try #require(timeline.layout().tracks.first)
    // A job's events are seen from the moment it is recorded: tasks tracked before are not.
    #expect(track.slices.map(\.task) == ["after"])
    #expect(track.outcome == .succeeded)
  }

  @Test func aFinishedJobIsRecordedAsEmptyAndEndsAtOnce() async throws {
    let job = ScriptedJob { _ in }
    try await job.run()
    let timeline = JobTimeline()
    timeline.record(job)
    #expect(await timeline.recorded())
    #expect(timeline.layout().tracks.map(\.slices.count) == [0])
  }

  @Test func theFollowerOfNestedJobsIsReleasedWithTheJobsStream() async throws {
    // A job that nobody records never asks for its nested jobs; one that is recorded lets go of
    // the timeline once it finished.
    let tracker = ReleaseTracker()
    do {
      let timeline = JobTimeline()
      let job = ScriptedJob { job in job.trackAndQueue(SequentialGroup([InstantTask()])) }
      tracker.watch(timeline, "timeline")
      tracker.watch(job, "job")
      timeline.record(job)
      try await job.run()
      #expect(await timeline.recorded())
      #expect(timeline.layout().tracks.count == 2)
    }
    #expect(await tracker.survivors().isEmpty)
  }
}
