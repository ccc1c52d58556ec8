import Foundation

/// Writes a ``TimelineLayout`` as Chrome trace-event JSON (the JSON Object Format, with a
/// `traceEvents` array), which Perfetto and `chrome://tracing` open.
///
/// Each job is a process: `pid` is its position in the layout plus 1, named by a `process_name`
/// metadata event (nested jobs say whose they are) and ordered by `process_sort_index`. Thread 0
/// is the job itself: one complete slice for its run and instant events (`"ph": "i"`) for
/// `groupFinished` and `allTasksFinished`. Threads 1, 2, … are its lanes, each task a complete
/// slice (`"ph": "X"`, `ts` and `dur` in microseconds) named by the task, with its group as `cat`.
/// Metadata come first, then the other events by `ts`.
enum TraceEventWriter {
  static func json(for layout: TimelineLayout) -> String {
    var metadata: [String] = []
    var timed: [(ts: Double, text: String)] = []
    let names = Dictionary(layout.tracks.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
    for (index, track) in layout.tracks.enumerated() {
      let pid = index + 1
      var processName = track.name
      if let parent = track.parent, let parentName = names[parent] {
        processName += " (in \(parentName))"
      }
      metadata.append(meta("process_name", pid: pid, tid: nil, args: ["name": .string(processName)]))
      metadata.append(meta("process_sort_index", pid: pid, tid: nil, args: ["sort_index": .int(index)]))
      metadata.append(meta("thread_name", pid: pid, tid: 0, args: ["name": .string("job")]))
      metadata.append(meta("thread_sort_index", pid: pid, tid: 0, args: ["sort_index": .int(0)]))
      for lane in 0..<track.lanes {
        metadata.append(meta("thread_name", pid: pid, tid: lane + 1, args: ["name": .string("lane \(lane + 1)")]))
        metadata.append(meta("thread_sort_index", pid: pid, tid: lane + 1, args: ["sort_index": .int(lane + 1)]))
      }
      var jobArgs: [(String, Value)] = [("outcome", .string(track.outcome.map(label) ?? "running"))]
      if case .failed(let error)? = track.outcome {
        jobArgs.append(("error", .string(error)))
      }
      timed.append(
        (
          track.begin,
          complete(
            track.name, cat: "job", ts: track.begin, dur: track.end - track.begin, pid: pid, tid: 0, args: jobArgs)
        ))
      for marker in track.markers {
        let name: String
        var args: [(String, Value)] = []
        switch marker.kind {
        case .groupFinished(let group):
          name = "groupFinished \(group)"
          args.append(("group", .string(group)))
        case .allTasksFinished:
          name = "allTasksFinished"
        case .timeLimitReached:
          name = "timeLimitReached"
          if case .failed(let error)? = track.outcome { args.append(("error", .string(error))) }
        }
        timed.append(
          (
            marker.at,
            event(name, ph: "i", cat: "job", ts: marker.at, pid: pid, tid: 0, extra: [("s", .string("t"))], args: args)
          ))
      }
      for slice in track.slices {
        var args: [(String, Value)] = [
          ("task", .string(slice.task)), ("group", .string(slice.group)), ("outcome", .string(label(slice.outcome))),
        ]
        if case .failed(let error) = slice.outcome {
          args.append(("error", .string(error)))
        }
        if let waited = slice.waited {
          args.append(("waited_us", .number(waited * 1e6)))
        }
        if let nested = slice.nestedJob, let position = layout.tracks.firstIndex(where: { $0.id == nested }) {
          args.append(("nested_job_pid", .int(position + 1)))
        }
        timed.append(
          (
            slice.begin,
            complete(
              slice.task, cat: slice.group, ts: slice.begin, dur: slice.duration, pid: pid, tid: slice.lane + 1,
              args: args)
          ))
      }
    }
    // A stable sort keeps a job's slice before the tasks that begin with it.
    let events =
      metadata
      + timed.enumerated().sorted { ($0.element.ts, $0.offset) < ($1.element.ts, $1.offset) }.map(\.element.text)
    return "{\"traceEvents\":[\n" + events.joined(separator: ",\n")
      + "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"JobKit JobTimeline\"}}\n"
  }

  static func label(_ outcome: TimelineLayout.Outcome) -> String {
    switch outcome {
    case .succeeded: return "succeeded"
    case .failed: return "failed"
    case .cancelled: return "cancelled"
    }
  }

  enum Value {
    case string(String)
    case int(Int)
    case number(Double)

    var json: String {
      switch self {
      case .string(let text): return quoted(text)
      case .int(let value): return String(value)
      case .number(let value): return microseconds(value)
      }
    }
  }

  private static func meta(_ name: String, pid: Int, tid: Int?, args: KeyValuePairs<String, Value>) -> String {
    var fields: [(String, Value)] = [("name", .string(name)), ("ph", .string("M")), ("pid", .int(pid))]
    if let tid { fields.append(("tid", .int(tid))) }
    return object(fields + [("args", .string(""))], args: args.map { ($0.key, $0.value) })
  }

  private static func complete(
    _ name: String, cat: String, ts: Double, dur: Double, pid: Int, tid: Int, args: [(String, Value)]
  ) -> String {
    event(name, ph: "X", cat: cat, ts: ts, pid: pid, tid: tid, extra: [("dur", .number(dur * 1e6))], args: args)
  }

  private static func event(
    _ name: String, ph: String, cat: String, ts: Double, pid: Int, tid: Int, extra: [(String, Value)],
    args: [(String, Value)]
  ) -> String {
    let fields: [(String, Value)] =
      [("name", .string(name)), ("cat", .string(cat)), ("ph", .string(ph)), ("ts", .number(ts * 1e6))] + extra
      + [("pid", .int(pid)), ("tid", .int(tid)), ("args", .string(""))]
    return object(fields, args: args)
  }

  /// `{"k":v,…}`; the field named `args` is written as the object of `args`.
  private static func object(_ fields: [(String, Value)], args: [(String, Value)]) -> String {
    let body = fields.map { key, value in
      let text =
        key == "args" ? "{" + args.map { "\(quoted($0.0)):\($0.1.json)" }.joined(separator: ",") + "}" : value.json
      return "\(quoted(key)):\(text)"
    }
    return "{" + body.joined(separator: ",") + "}"
  }

  /// A number of microseconds with nanosecond precision, never negative zero or exponent notation.
  static func microseconds(_ value: Double) -> String {
    guard value.isFinite else { return "0" }
    let text = String(format: "%.3f", value)
    return text == "-0.000" ? "0.000" : text
  }

  /// `text` as a JSON string.
  static func quoted(_ text: String) -> String {
    var result = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case "\n": result += "\\n"
      case "\r": result += "\\r"
      case "\t": result += "\\t"
      case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
        result += String(format: "\\u%04x", scalar.value)
      default: result.unicodeScalars.append(scalar)
      }
    }
    return result + "\""
  }
}
