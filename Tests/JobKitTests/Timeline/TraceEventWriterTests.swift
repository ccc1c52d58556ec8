import Foundation
import Testing

@testable import JobKit

/// One trace event, decoded with the fields the trace-event format requires.
struct DecodedTraceEvent: Decodable {
  let name: String
  let ph: String
  let pid: Int
  let tid: Int?
  let ts: Double?
  let dur: Double?
  let cat: String?
  let s: String?
  let args: [String: ArgValue]?

  enum ArgValue: Decodable, Equatable {
    case string(String)
    case number(Double)

    init(from decoder: any Decoder) throws {
      let container = try decoder.singleValueContainer()
      if let text = try? container.decode(String.self) {
        self = .string(text)
      } else {
        self = .number(try container.decode(Double.self))
      }
    }

    var text: String? { if case .string(let text) = self { return text } else { return nil } }
    var number: Double? { if case .number(let value) = self { return value } else { return nil } }
  }
}

struct DecodedTrace: Decodable {
  let traceEvents: [DecodedTraceEvent]
  let displayTimeUnit: String?
}

/// Checks `json` against the trace-event format and returns its events; records a test issue for
/// each violation.
func validatedTraceEvents(_ json: Data, sourceLocation: SourceLocation = #_sourceLocation) throws -> [DecodedTraceEvent]
{
  // Well-formed JSON first, then the fields each phase needs.
  _ = try JSONSerialization.jsonObject(with: json)
  let trace = try JSONDecoder().decode(DecodedTrace.self, from: json)
  var lastTimestamp = -Double.infinity
  var seenTimed = false
  for event in trace.traceEvents {
    switch event.ph {
    case "M":
      #expect(!seenTimed, "metadata come first", sourceLocation: sourceLocation)
      #expect(event.args?["name"] != nil || event.args?["sort_index"] != nil, sourceLocation: sourceLocation)
    case "X", "i":
      seenTimed = true
      let ts = try #require(event.ts, sourceLocation: sourceLocation)
      #expect(event.tid != nil, sourceLocation: sourceLocation)
      #expect(ts >= 0, sourceLocation: sourceLocation)
      #expect(ts >= lastTimestamp, "timestamps are monotonic", sourceLocation: sourceLocation)
      lastTimestamp = ts
      if event.ph == "X" {
        let dur = try #require(event.dur, sourceLocation: sourceLocation)
        #expect(dur >= 0, sourceLocation: sourceLocation)
      } else {
        #expect(event.s == "t", sourceLocation: sourceLocation)
      }
    default:
      Issue.record("unexpected phase \(event.ph)", sourceLocation: sourceLocation)
    }
  }
  // Slices of one thread nest or are disjoint, as trace viewers need (1 ns of rounding allowed).
  let slices = Dictionary(grouping: trace.traceEvents.filter { $0.ph == "X" }) { "\($0.pid)/\($0.tid!)" }
  for (_, thread) in slices {
    for (first, second) in zip(thread, thread.dropFirst()) {
      let firstEnd = first.ts! + first.dur!
      let secondEnd = second.ts! + second.dur!
      let disjoint = second.ts! >= firstEnd - 0.001
      let nested = secondEnd <= firstEnd + 0.001
      #expect(disjoint || nested, "\(first.name) and \(second.name) overlap", sourceLocation: sourceLocation)
    }
  }
  return trace.traceEvents
}

@Suite("TraceEventWriter")
struct TraceEventWriterTests {
  func sampleLayout() -> TimelineLayout {
    var recording = RecordingBuilder()
    let b = recording
    let root = recording.job(
      "Root \"quoted\"\n<job>",
      [
        .started(at: b.at(0)),
        .taskTracked(task: "read ✓", group: "Work<Array<Int>>", at: b.at(1)),
        .taskTracked(task: "read ✓", group: "Work<Array<Int>>", at: b.at(1)),
        .taskTracked(task: "Group", group: "Group", at: b.at(1)),
        .taskStarted(task: "read ✓", group: "Work<Array<Int>>", at: b.at(1.2)),
        .taskStarted(task: "read ✓", group: "Work<Array<Int>>", at: b.at(1.5)),
        .taskStarted(task: "Group", group: "Group", at: b.at(2)),
        .taskFinished(
          task: "read ✓", group: "Work<Array<Int>>", duration: milliseconds(2), outcome: .succeeded, at: b.at(3)),
        .taskFinished(
          task: "read ✓", group: "Work<Array<Int>>", duration: milliseconds(3), outcome: .failed("bad \\ thing\t1"),
          at: b.at(4.5)),
        .groupFinished(group: "Work<Array<Int>>", at: b.at(4.5)),
        .taskFinished(task: "Group", group: "Group", duration: milliseconds(4), outcome: .succeeded, at: b.at(6)),
        .allTasksFinished(at: b.at(6)),
        .finished(outcome: .failed("JobFailures"), at: b.at(6)),
      ])
    _ = recording.job(
      "Group", parent: root,
      [
        .started(at: b.at(2)),
        .taskTracked(task: "x", group: "X", at: b.at(2)),
        .taskFinished(task: "x", group: "X", duration: milliseconds(1), outcome: .cancelled, at: b.at(3)),
        .finished(outcome: .cancelled, at: b.at(6)),
      ])
    return TimelineLayout(recording.jobs)
  }

  @Test func theJSONIsAValidTraceWithATrackPerJobAndASlicePerTask() throws {
    let json = Data(TraceEventWriter.json(for: sampleLayout()).utf8)
    let events = try validatedTraceEvents(json)
    let processNames = events.filter { $0.ph == "M" && $0.name == "process_name" }
    #expect(processNames.map(\.pid) == [1, 2])
    #expect(
      processNames.map { $0.args?["name"]?.text } == ["Root \"quoted\"\n<job>", "Group (in Root \"quoted\"\n<job>)"])
    let threadNames = events.filter { $0.ph == "M" && $0.name == "thread_name" }
    #expect(threadNames.filter { $0.pid == 1 }.map { $0.args?["name"]?.text } == ["job", "lane 1", "lane 2", "lane 3"])

    let tasks = events.filter { $0.ph == "X" && $0.cat != "job" }
    #expect(tasks.count == 4)
    let reads = tasks.filter { $0.name == "read ✓" }
    #expect(reads.map(\.cat) == ["Work<Array<Int>>", "Work<Array<Int>>"])
    #expect(reads.map(\.tid) == [3, 2])
    // Each finish is matched to the start its duration points at: 3 ms - 2 ms and 4.5 ms - 3 ms.
    #expect(reads.map { $0.args?["outcome"]?.text } == ["succeeded", "failed"])
    #expect(reads.last?.args?["error"]?.text == "bad \\ thing\t1")
    #expect(reads.map { $0.ts.map { ($0 * 1000).rounded() } } == [1_000_000, 1_500_000])
    #expect(reads.map { $0.dur.map { ($0 * 1000).rounded() } } == [2_000_000, 3_000_000])
    let group = try #require(tasks.first { $0.name == "Group" })
    #expect(group.args?["nested_job_pid"]?.number == 2)
    #expect(group.args?["outcome"]?.text == "cancelled")
    let nested = try #require(tasks.first { $0.pid == 2 })
    #expect(nested.args?["outcome"]?.text == "cancelled")

    let jobs = events.filter { $0.ph == "X" && $0.cat == "job" }
    #expect(jobs.map(\.tid) == [0, 0])
    #expect(jobs.first?.args?["outcome"]?.text == "failed")
    let instants = events.filter { $0.ph == "i" }.map(\.name)
    #expect(instants == ["groupFinished Work<Array<Int>>", "allTasksFinished"])
  }

  @Test func anEmptyTimelineIsAnEmptyTrace() throws {
    let events = try validatedTraceEvents(Data(TraceEventWriter.json(for: TimelineLayout([])).utf8))
    #expect(events.isEmpty)
  }

  @Test(arguments: [
    ("plain", "\"plain\""), ("a\"b", "\"a\\\"b\""), ("back\\slash", "\"back\\\\slash\""), ("\u{1}", "\"\\u0001\""),
    ("line\nbreak", "\"line\\nbreak\""), ("é ✓ 😀", "\"é ✓ 😀\""),
  ])
  func stringsAreQuotedAsJSON(text: String, quoted: String) throws {
    #expect(TraceEventWriter.quoted(text) == quoted)
    let decoded = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
    #expect(decoded == [text])
  }
}
