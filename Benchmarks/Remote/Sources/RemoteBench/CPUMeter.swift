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
    var total = seconds(of: postmaster, reaped: true)
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for entry in entries {
      guard let pid = Int32(entry), pid != postmaster, parent(of: pid) == postmaster else { continue }
      total += seconds(of: pid)
    }
    return total
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
