import Foundation
import Testing

@testable import JobKit

/// Builds recordings by hand: events at given milliseconds after one instant.
struct RecordingBuilder {
  let origin = ContinuousClock.now
  var jobs: [TimelineRecording.Job] = []

  func at(_ milliseconds: Double) -> ContinuousClock.Instant {
    origin + .microseconds(Int64(milliseconds * 1000))
  }

  mutating func job(_ name: String, type: String? = nil, parent: Int? = nil, _ events: [TimelineRecording.Event])
    -> Int
  {
    var job = TimelineRecording.Job(id: jobs.count, name: name, type: type ?? name, parent: parent)
    job.events = events
    job.ended = true
    jobs.append(job)
    return job.id
  }
}

func milliseconds(_ value: Double) -> Duration { .microseconds(Int64(value * 1000)) }

@Suite("TimelineLayout")
struct TimelineLayoutTests {
  @Test func tasksOfOneNameAreToldApartByTimeAndGetLanes() {
    var recording = RecordingBuilder()
    let b = recording
    _ = recording.job(
      "Job",
      [
        .started(at: b.at(0)),
        .taskTracked(task: "A", group: "A", at: b.at(1)),
        .taskTracked(task: "A", group: "A", at: b.at(1)),
        .taskStarted(task: "A", group: "A", at: b.at(2)),
        .taskStarted(task: "A", group: "A", at: b.at(3)),
        // The second run ends first: it is the one that began at 3 ms (4.5 - 1.5).
        .taskFinished(task: "A", group: "A", duration: milliseconds(1.5), outcome: .succeeded, at: b.at(4.5)),
        .taskFinished(task: "A", group: "A", duration: milliseconds(6), outcome: .failed("boom"), at: b.at(8.5)),
        .taskTracked(task: "B", group: "B", at: b.at(9)),
        .taskStarted(task: "B", group: "B", at: b.at(9)),
        .taskFinished(task: "B", group: "B", duration: milliseconds(1), outcome: .cancelled, at: b.at(10)),
        .groupFinished(group: "A", at: b.at(8.5)),
        .allTasksFinished(at: b.at(10)),
        .finished(outcome: .succeeded, at: b.at(10)),
      ])
    let layout = TimelineLayout(recording.jobs)
    #expect(layout.tracks.count == 1)
    let track = layout.tracks[0]
    #expect(track.lanes == 2)
    #expect(track.outcome == .succeeded)
    #expect(layout.groups == ["A", "B"])
    let slices = track.slices.map { ($0.task, ($0.begin * 1e4).rounded() / 10, $0.lane, $0.outcome) }
    // Sorted by start: A from 2 ms for 6 ms (lane 0), A from 3 ms for 1.5 ms (lane 1), B from 9 ms.
    #expect(slices.map(\.0) == ["A", "A", "B"])
    #expect(slices.map(\.1) == [2, 3, 9])
    #expect(slices.map(\.2) == [0, 1, 0])
    #expect(slices.map(\.3) == [.failed("boom"), .succeeded, .cancelled])
    #expect(track.slices[0].waited.map { ($0 * 1e4).rounded() / 10 } == 1)
    #expect(track.markers.count == 2)
    #expect(abs(layout.span - 0.010) < 1e-9)
  }

  @Test func aTaskFinishedLaterThanItsStartPlusDurationEndsWithItsDuration() {
    // Delivery delays: the finish is routed late; the slice keeps its start and its duration.
    var recording = RecordingBuilder()
    let b = recording
    _ = recording.job(
      "Job",
      [
        .taskTracked(task: "T", group: "T", at: b.at(0)),
        .taskFinished(task: "T", group: "T", duration: milliseconds(2), outcome: .succeeded, at: b.at(7)),
      ])
    let slice = TimelineLayout(recording.jobs).tracks[0].slices[0]
    #expect(abs(slice.begin - 0) < 1e-9)
    #expect(abs(slice.duration - 0.002) < 1e-9)
    #expect(slice.waited == nil)
  }

  @Test func aTaskTrackedBeforeRecordingBeganStartsAtItsFinishMinusItsDuration() {
    var recording = RecordingBuilder()
    let b = recording
    _ = recording.job(
      "Job", [.taskFinished(task: "T", group: "T", duration: milliseconds(3), outcome: .succeeded, at: b.at(5))])
    let layout = TimelineLayout(recording.jobs)
    // The origin moves to the task's start, so no time is negative.
    #expect(layout.tracks[0].slices[0].begin == 0)
    #expect(abs(layout.span - 0.003) < 1e-9)
  }

  @Test func nestedJobsFollowTheirParentsAndOwnTheirTaskSlice() {
    var recording = RecordingBuilder()
    let b = recording
    let root = recording.job(
      "Root",
      [
        .started(at: b.at(0)),
        .taskTracked(task: "SequentialGroup", group: "SequentialGroup", at: b.at(1)),
        .taskTracked(task: "Other", group: "Other", at: b.at(1)),
        .taskTracked(task: "ConcurrentGroup", group: "ConcurrentGroup", at: b.at(1)),
        .taskStarted(task: "SequentialGroup", group: "SequentialGroup", at: b.at(1)),
        .taskStarted(task: "ConcurrentGroup", group: "ConcurrentGroup", at: b.at(1)),
        .taskFinished(
          task: "ConcurrentGroup", group: "ConcurrentGroup", duration: milliseconds(2), outcome: .succeeded, at: b.at(3)
        ),
        .taskFinished(
          task: "SequentialGroup", group: "SequentialGroup", duration: milliseconds(5), outcome: .succeeded, at: b.at(6)
        ),
        .taskFinished(task: "Other", group: "Other", duration: milliseconds(5), outcome: .succeeded, at: b.at(6)),
        .finished(outcome: .cancelled, at: b.at(7)),
      ])
    let sequential = recording.job(
      "SequentialGroup", parent: root,
      [.started(at: b.at(1)), .finished(outcome: .cancelled, at: b.at(6))])
    let inner = recording.job(
      "inner", type: "ConcurrentGroup", parent: sequential,
      [.started(at: b.at(2)), .finished(outcome: .succeeded, at: b.at(3))])
    let concurrent = recording.job(
      "ConcurrentGroup", parent: root, [.started(at: b.at(1)), .finished(outcome: .succeeded, at: b.at(3))])
    let layout = TimelineLayout(recording.jobs)
    #expect(layout.tracks.map(\.id) == [root, sequential, inner, concurrent])
    #expect(layout.tracks.map(\.depth) == [0, 1, 2, 1])
    let slices = layout.tracks[0].slices
    #expect(slices.first { $0.group == "SequentialGroup" }?.nestedJob == sequential)
    #expect(slices.first { $0.group == "ConcurrentGroup" }?.nestedJob == concurrent)
    #expect(slices.first { $0.group == "Other" }?.nestedJob == nil)
    // A cancelled nested job's slice in its parent shows the cancel.
    #expect(slices.first { $0.group == "SequentialGroup" }?.outcome == .cancelled)
    #expect(layout.tracks[0].outcome == .cancelled)
  }

  @Test func aJobStillRunningHasNoOutcomeAndEndsAtItsLastEvent() {
    var recording = RecordingBuilder()
    let b = recording
    _ = recording.job("Job", [.started(at: b.at(0)), .taskTracked(task: "T", group: "T", at: b.at(4))])
    let track = TimelineLayout(recording.jobs).tracks[0]
    #expect(track.outcome == nil)
    #expect(track.slices.isEmpty)
    #expect(abs(track.end - 0.004) < 1e-9)
  }

  @Test(arguments: [
    // (begin, end) pairs, and the lanes of the slices in start order (placed latest end first).
    ([(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)], [0, 0, 0], 1),
    ([(0.0, 3.0), (1.0, 2.0), (1.5, 4.0), (2.0, 5.0)], [2, 0, 1, 0], 3),
    ([(5.0, 6.0), (0.0, 10.0)], [0, 1], 2),
  ])
  func lanesNeverOverlap(spans: [(Double, Double)], lanes: [Int], count: Int) {
    var slices = spans.map {
      TimelineLayout.Slice(task: "t", group: "g", begin: $0.0, duration: $0.1 - $0.0, outcome: .succeeded)
    }
    #expect(TimelineLayout.assignLanes(&slices) == count)
    // Sorted by start; nothing moved (no slice may begin earlier than it does).
    #expect(slices.map(\.begin) == spans.map(\.0).sorted())
    #expect(slices.map(\.lane) == lanes)
    for lane in 0..<count {
      let mine = slices.filter { $0.lane == lane }
      #expect(zip(mine, mine.dropFirst()).allSatisfy { $0.end <= $1.begin })
    }
  }

  @Test func aBurstOfShortTasksDeliveredTogetherIsLaidEndToEndWithinWhatTheEventsAllow() {
    // Ten 1 ms tasks tracked from 0 ms, their starts all delivered at 20 ms: they ran one after
    // another before that, not ten at once.
    var slices = (0..<10).map { _ in
      TimelineLayout.Slice(task: "t", group: "g", begin: 0.020, duration: 0.001, outcome: .succeeded, earliest: 0)
    }
    #expect(TimelineLayout.assignLanes(&slices) == 1)
    #expect(slices.allSatisfy { $0.end <= 0.021 + 1e-12 && $0.begin >= 0 && abs($0.duration - 0.001) < 1e-12 })
    #expect(zip(slices, slices.dropFirst()).allSatisfy { $0.end <= $1.begin + 1e-12 })
    // Tracked only at 19.5 ms: at most the first half-millisecond is free, so most need a lane.
    var late = (0..<3).map { _ in
      TimelineLayout.Slice(task: "t", group: "g", begin: 0.020, duration: 0.001, outcome: .succeeded, earliest: 0.0195)
    }
    #expect(TimelineLayout.assignLanes(&late) == 3)
    #expect(late.allSatisfy { $0.begin == 0.020 })
  }

  @Test func startsDeliveredInOneBatchAreLaidEndToEndAfterThePreviousDelivery() {
    // Three 1 ms tasks tracked at 1 ms; their starts and finishes all came in one delivery at
    // 5 ms: they ran one after another between 1 ms and 5 ms, not three at once.
    var recording = RecordingBuilder()
    let b = recording
    var events: [TimelineRecording.Event] = [.started(at: b.at(0))]
    events += (0..<3).map { _ in .taskTracked(task: "T", group: "T", at: b.at(1)) }
    events += (0..<3).map { _ in .taskStarted(task: "T", group: "T", at: b.at(5)) }
    events += (0..<3).map { _ in
      .taskFinished(task: "T", group: "T", duration: milliseconds(1), outcome: .succeeded, at: b.at(5))
    }
    _ = recording.job("Job", events)
    let track = TimelineLayout(recording.jobs).tracks[0]
    #expect(track.lanes == 1)
    #expect(track.slices.map { ($0.begin * 1e4).rounded() / 10 } == [2, 3, 4])
    // The same events delivered one by one stay where they are, on lanes of their own.
    var alone = RecordingBuilder()
    let c = alone
    _ = alone.job(
      "Job",
      [.started(at: c.at(0))]
        + (0..<3).flatMap { index -> [TimelineRecording.Event] in
          [
            .taskTracked(task: "T", group: "T", at: c.at(1 + 0.1 * Double(index))),
            .taskStarted(task: "T", group: "T", at: c.at(4 + 0.1 * Double(index))),
          ]
        }
        + (0..<3).map { index in
          .taskFinished(
            task: "T", group: "T", duration: milliseconds(1), outcome: .succeeded, at: c.at(5 + 0.1 * Double(index)))
        })
    #expect(TimelineLayout(alone.jobs).tracks[0].lanes == 3)
  }

  @Test func nothingRecordedIsAnEmptyLayout() {
    let layout = TimelineLayout([])
    #expect(layout.tracks.isEmpty)
    #expect(layout.span == 0)
    #expect(layout.origin == nil)
  }
}
