import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What the crash test's processes did, one event per line in a file per process. A line is
/// written with one `write(2)` on a file opened with `O_APPEND`: once the call returned, the line
/// is the kernel's, so a `kill -9` right after loses nothing, and a restart of the database
/// (which a table of events would share the faults of) cannot lose it either.
public enum CrashHistory {
  /// One recorded event.
  public enum Event: Equatable, Sendable {
    /// A handler started: row `key`'s `attempt`.
    case start(key: String, attempt: Int, time: Double, pid: Int32)
    /// A job's callback got child `child`'s result `value`, in `parent`'s attempt `parentAttempt`.
    case delivery(parent: String, parentAttempt: Int, child: String, value: String, time: Double, pid: Int32)
    /// The body of durable step `key` ran (in its job's attempt `parentAttempt`).
    case stepBody(key: String, parentAttempt: Int, time: Double, pid: Int32)
  }

  /// A row of the queue at the end of the run. `output` is normalised as deliveries are
  /// (a tree's leaves joined by commas, a leaf's text, a step's value).
  public struct Row: Equatable, Sendable {
    /// The row's key.
    public var key: String
    /// The row's kind.
    public var kind: String
    /// The row's state.
    public var state: String
    /// The row's last attempt.
    public var attempt: Int
    /// Seconds since 1970 (the database's clock: the same host as the processes').
    public var finishedAt: Double?
    /// The parent row's key.
    public var parentKey: String?
    /// The stored output, normalised.
    public var output: String?

    /// A row.
    public init(
      key: String, kind: String, state: String, attempt: Int, finishedAt: Double?, parentKey: String?,
      output: String?
    ) {
      self.key = key
      self.kind = kind
      self.state = state
      self.attempt = attempt
      self.finishedAt = finishedAt
      self.parentKey = parentKey
      self.output = output
    }
  }

  /// A rule the run broke.
  public struct Violation: Equatable, Sendable, CustomStringConvertible {
    /// The rules the checker verifies.
    public enum Rule: String, Sendable {
      case output
      case acceptedOnce
      case startedWhenFinal
      case stepRanWhenFinal
      case cancelledTreeLive
    }
    /// The rule broken.
    public var rule: Rule
    /// What broke it.
    public var detail: String
    /// The rule and what broke it.
    public var description: String { "\(rule): \(detail)" }
  }

  /// Checks a run's history against its final rows (a pure function; its tests break each rule).
  ///
  /// - `output`: the root's output equals `expectedOutput` (the in-process run's).
  /// - `acceptedOnce`: one row per key; each child of a completed job completed, and reached
  ///   the job's final attempt once; no attempt got a child's result twice, nor a value other
  ///   than the one its row stores.
  /// - `startedWhenFinal`: no handler started after its row became final.
  /// - `stepRanWhenFinal`: no durable step's body ran after its row existed (final).
  /// - `cancelledTreeLive`: no row of the tree under `cancelledRoot` is available or running.
  public static func check(
    events: [Event], rows: [Row], rootKey: String, rootOutput: String?, expectedOutput: String,
    cancelledRoot: String?
  ) -> [Violation] {
    var violations: [Violation] = []
    func add(_ rule: Violation.Rule, _ detail: String) {
      violations.append(Violation(rule: rule, detail: detail))
    }
    if rootOutput != expectedOutput {
      add(.output, "root '\(show(rootKey))' gave \(rootOutput ?? "nothing"), the in-process run \(expectedOutput)")
    }
    var byKey: [String: Row] = [:]
    for row in rows {
      if byKey[row.key] != nil { add(.acceptedOnce, "two rows for key '\(show(row.key))'") }
      byKey[row.key] = row
    }
    var deliveries: [String: Int] = [:]
    for case .delivery(let parent, let attempt, let child, let value, _, _) in events {
      let id = "\(parent)\t\(attempt)\t\(child)"
      deliveries[id, default: 0] += 1
      if deliveries[id] == 2 {
        add(.acceptedOnce, "attempt \(attempt) of '\(show(parent))' got the result of '\(show(child))' twice")
      }
      if let row = byKey[child], row.output != value {
        add(.acceptedOnce, "'\(show(child))' delivered \(value), its row stores \(row.output ?? "nothing")")
      }
    }
    for row in rows where row.state == "completed" {
      for child in rows where child.parentKey == row.key {
        if child.state != "completed" {
          add(.acceptedOnce, "'\(show(child.key))' of completed '\(show(row.key))' is \(child.state)")
        }
        let count = deliveries["\(row.key)\t\(row.attempt)\t\(child.key)"] ?? 0
        if count != 1 {
          add(
            .acceptedOnce,
            "final attempt \(row.attempt) of '\(show(row.key))' got '\(show(child.key))' \(count) times")
        }
      }
    }
    for event in events {
      switch event {
      case .start(let key, let attempt, let time, let pid):
        guard let row = byKey[key] else {
          add(.startedWhenFinal, "a handler of '\(show(key))' started (pid \(pid)) with no row")
          continue
        }
        if attempt > row.attempt {
          add(.startedWhenFinal, "attempt \(attempt) of '\(show(key))' started; the row ended at \(row.attempt)")
        }
        if let finished = row.finishedAt, time > finished {
          add(
            .startedWhenFinal,
            "attempt \(attempt) of '\(show(key))' started (pid \(pid)) \(ms(time - finished)) after its row was final")
        }
      case .stepBody(let key, _, let time, let pid):
        if let finished = byKey[key]?.finishedAt, time > finished {
          add(.stepRanWhenFinal, "step '\(show(key))' ran (pid \(pid)) \(ms(time - finished)) after its row was stored")
        }
      case .delivery:
        break
      }
    }
    if let cancelledRoot {
      for row in rows where row.key == cancelledRoot || row.key.hasPrefix(cancelledRoot + separator) {
        if row.state == "available" || row.state == "running" {
          add(.cancelledTreeLive, "'\(show(row.key))' of the cancelled tree is \(row.state)")
        }
      }
    }
    return violations
  }

  /// The separator of scoped keys (a durable job's child key is its key, this, the local key).
  public static let separator = "\u{1F}"

  /// A key as people read it: the separator shown as `›`.
  public static func show(_ key: String) -> String {
    key.replacingOccurrences(of: separator, with: "›")
  }

  static func ms(_ seconds: Double) -> String {
    "\(Int((seconds * 1000).rounded())) ms"
  }
}

extension CrashHistory.Event {
  /// The event as one line (tab-separated, no newline inside: keys and values have none).
  public var line: String {
    switch self {
    case .start(let key, let attempt, let time, let pid):
      return ["start", String(time), String(pid), key, String(attempt)].joined(separator: "\t")
    case .delivery(let parent, let attempt, let child, let value, let time, let pid):
      return ["delivery", String(time), String(pid), parent, String(attempt), child, value].joined(separator: "\t")
    case .stepBody(let key, let attempt, let time, let pid):
      return ["step", String(time), String(pid), key, String(attempt)].joined(separator: "\t")
    }
  }

  /// The event a line holds; `nil` for a line cut short (none: each is one `write`) or unknown.
  public init?(line: Substring) {
    let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    guard fields.count >= 5, let time = Double(fields[1]), let pid = Int32(fields[2]) else { return nil }
    switch fields[0] {
    case "start":
      guard let attempt = Int(fields[4]) else { return nil }
      self = .start(key: fields[3], attempt: attempt, time: time, pid: pid)
    case "delivery":
      guard fields.count == 7, let attempt = Int(fields[4]) else { return nil }
      self = .delivery(
        parent: fields[3], parentAttempt: attempt, child: fields[5], value: fields[6], time: time, pid: pid)
    case "step":
      guard let attempt = Int(fields[4]) else { return nil }
      self = .stepBody(key: fields[3], parentAttempt: attempt, time: time, pid: pid)
    default:
      return nil
    }
  }
}

/// A process's history file: `DIRECTORY/PID.log`, appended to with one `write(2)` per event.
public final class CrashHistoryLog: Sendable {
  private let descriptor: Int32

  /// Opens (creates) this process's file in `directory`.
  public init(directory: String) throws {
    let path = directory + "/\(getpid()).log"
    descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    guard descriptor >= 0 else {
      throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
    }
  }

  deinit {
    close(descriptor)
  }

  /// Writes `event` with this process's id and the time now.
  public func record(_ make: (Double, Int32) -> CrashHistory.Event) {
    let line = make(Date().timeIntervalSince1970, getpid()).line + "\n"
    var bytes = Array(line.utf8)
    _ = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
  }

  /// Every event of the files in `directory`.
  public static func read(directory: String) throws -> [CrashHistory.Event] {
    var events: [CrashHistory.Event] = []
    for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name.hasSuffix(".log") {
      let text = try String(contentsOfFile: directory + "/" + name, encoding: .utf8)
      events += text.split(separator: "\n").compactMap { CrashHistory.Event(line: $0) }
    }
    return events
  }
}
