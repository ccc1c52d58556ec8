import Foundation

/// CPU time (user + system) of processes, from `/proc/<pid>/stat` (Linux): the worker processes,
/// this process (the job), and the PostgreSQL server (the postmaster, its live children, and the
/// children it already reaped, which its `cutime`/`cstime` hold). Elsewhere every reading is 0.
enum CPUMeter {
  /// Seconds per clock tick of `/proc/<pid>/stat`'s times.
  private static let tick = 1 / Double(max(1, sysconf(Int32(_SC_CLK_TCK))))

  /// The fields after the command name (which may hold spaces and parentheses): state, ppid, ...
  private static func fields(_ pid: Int32) -> [Substring]? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
      let close = text.lastIndex(of: ")")
    else { return nil }
    return text[text.index(after: close)...].split(separator: " ")
  }

  /// `utime + stime` of `pid` (and, with `reaped`, of its children it waited for), in seconds;
  /// 0 for a process that is gone.
  static func seconds(of pid: Int32, reaped: Bool = false) -> Double {
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    guard let fields = fields(pid), fields.count > 14 else { return 0 }
    let own = (Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)
    let children = reaped ? (Double(fields[13]) ?? 0) + (Double(fields[14]) ?? 0) : 0
    return (own + children) * tick
  }

  /// The parent of `pid`, if it runs.
  static func parent(of pid: Int32) -> Int32? {
    fields(pid).flatMap { $0.count > 1 ? Int32($0[1]) : nil }
  }

  /// This process's CPU time.
  static func ownSeconds() -> Double {
    seconds(of: getpid())
  }

  /// The server's CPU time: the postmaster's own and its reaped children's, and its live
  /// children's (backends, WAL writer, checkpointer, ...). A backend that exits between two
  /// readings moves from the live sum to the reaped one, so differences stay right.
  static func serverSeconds(postmaster: Int32) -> Double {
    children(of: postmaster).reduce(seconds(of: postmaster, reaped: true)) { $0 + seconds(of: $1) }
  }

  /// The live children of `pid`.
  private static func children(of pid: Int32) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry in
      guard let child = Int32(entry), child != pid, parent(of: child) == pid else { return nil }
      return child
    }
  }

  /// How long the live threads of `pid` waited for a core (runnable, not running: the second
  /// field of `/proc/<pid>/task/<tid>/schedstat`), in seconds; 0 where the kernel does not say.
  static func waitSeconds(of pid: Int32) -> Double {
    let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return threads.reduce(0) { total, thread in
      guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/schedstat", encoding: .utf8)
      else { return total }
      let fields = text.split(separator: " ")
      return total + (fields.count > 1 ? (Double(fields[1]) ?? 0) / 1e9 : 0)
    }
  }

  /// How long the server's live processes (the postmaster and its children) waited for a core.
  static func serverWaitSeconds(postmaster: Int32) -> Double {
    children(of: postmaster).reduce(waitSeconds(of: postmaster)) { $0 + waitSeconds(of: $1) }
  }

  /// The machine's CPU time so far, every process of every user: busy (not idle nor waiting
  /// for I/O) and in all, in ticks (`/proc/stat`'s first line).
  static func machineTicks() -> (busy: Double, all: Double) {
    guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
      let line = text.split(separator: "\n").first
    else { return (0, 0) }
    // cpu user nice system idle iowait irq softirq steal ...
    let values = line.split(separator: " ").dropFirst().prefix(8).map { Double($0) ?? 0 }
    guard values.count == 8 else { return (0, 0) }
    let all = values.reduce(0, +)
    return (all - values[3] - values[4], all)
  }
}

/// CPU seconds spent between two readings, by side.
struct CPUSeconds: Sendable {
  var workers = 0.0
  var job = 0.0
  var server = 0.0

  var total: Double { workers + job + server }

  static func - (lhs: CPUSeconds, rhs: CPUSeconds) -> CPUSeconds {
    CPUSeconds(workers: lhs.workers - rhs.workers, job: lhs.job - rhs.job, server: lhs.server - rhs.server)
  }
}
