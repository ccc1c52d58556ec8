import Foundation
import JobKit
import JobKitPostgres
import JobKitTesting
import PostgresNIO
import RemoteTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension DatabaseTests {
  /// A durable job tree under a random fault schedule (`kill -9` of any worker process,
  /// `SIGSTOP` past the lease then `SIGCONT`, `pg_ctl restart`), checked over its recorded
  /// history by ``CrashHistory/check(events:rows:rootKey:rootOutput:expectedOutput:cancelledRoot:)``.
  ///
  /// Each run prints its seed: `JOBKIT_CRASH_SEED=N` runs it again (with `JOBKIT_CRASH_RUNS`
  /// runs, seeds N, N+1, …). `JOBKIT_CRASH_RUNS` (1), `JOBKIT_CRASH_WIDTH` (6: 6 + 36 jobs,
  /// 216 leaves, 43 steps) and `JOBKIT_CRASH_FAULTS` (faults of each kind, 2) size it.
  @Suite(.timeLimit(.minutes(30)))
  struct DurableCrashTests {
    static let environment = ProcessInfo.processInfo.environment

    @Test func aRandomFaultScheduleBreaksNoRuleOfTheHistory() async throws {
      let runs = Int(Self.environment["JOBKIT_CRASH_RUNS"] ?? "") ?? 1
      let width = Int(Self.environment["JOBKIT_CRASH_WIDTH"] ?? "") ?? 6
      let faults = Int(Self.environment["JOBKIT_CRASH_FAULTS"] ?? "") ?? 2
      let firstSeed = UInt64(Self.environment["JOBKIT_CRASH_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
      var reports: [CrashRun.Report] = []
      for run in 0..<runs {
        let seed = firstSeed &+ UInt64(run)
        print("durable crash run \(run + 1)/\(runs): JOBKIT_CRASH_SEED=\(seed)")
        let report = try await CrashRun(seed: seed, width: width, faultsPerKind: faults).run()
        print("durable crash run \(run + 1)/\(runs) (seed \(seed)): \(report.summary)")
        #expect(report.violations.isEmpty, "JOBKIT_CRASH_SEED=\(seed): \(report.violations)")
        #expect(report.faults.values.reduce(0, +) > 0, "JOBKIT_CRASH_SEED=\(seed): no fault was injected")
        reports.append(report)
      }
      let recoveries = reports.flatMap(\.recoveries).sorted()
      var byKind: [String: Int] = [:]
      for report in reports { byKind.merge(report.faults) { $0 + $1 } }
      let violations = reports.map(\.violations.count).reduce(0, +)
      print(
        "durable crash test: \(runs) runs, faults \(byKind.sorted { $0.key < $1.key }), violations \(violations), "
          + "recovery after kill -9 \(CrashRun.percentiles(recoveries))")
    }
  }
}

/// One run of the crash test: 3 worker processes, the tree `r`, the faults, then a tree `x`
/// cancelled while one of its processes is dead; the history and the rows checked.
struct CrashRun {
  enum Fault: String, CaseIterable {
    case kill = "kill -9"
    case stop = "SIGSTOP past the lease"
    case restart = "pg_ctl restart"
  }

  struct Report {
    var faults: [String: Int] = [:]
    var violations: [CrashHistory.Violation] = []
    /// Per `kill -9` that held rows: until the last of them started again elsewhere.
    var recoveries: [Double] = []
    var seconds: Double = 0
    /// Handler starts, deliveries and step bodies recorded.
    var events = (starts: 0, deliveries: 0, steps: 0)

    var summary: String {
      "\(Int(seconds)) s, \(events.starts) handler starts, \(events.deliveries) deliveries, \(events.steps) step bodies, "
        + "faults \(faults.sorted { $0.key < $1.key }), violations \(violations.count), "
        + "recovery after kill -9 \(CrashRun.percentiles(recoveries))"
    }
  }

  let seed: UInt64
  let width: Int
  let faultsPerKind: Int
  let lease = 2.0

  func run() async throws -> Report {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-crash-\(seed)-\(getpid())")
      .path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let started = Date()
    return try await TestDatabase.withClient { client in
      var random = SeededGenerator(seed: seed)
      let queue = try await TestDatabase.makeQueue(client, maxAttempts: 100)
      let extra = [
        "--kinds", "echo,tree", "--history", directory, "--lease", "\(lease)", "--heartbeat", "0.5",
        "--max-attempts", "100", "--max-concurrent", "4",
      ]
      var serial = 0
      func startWorker() async throws -> ChildProcess {
        serial += 1
        let worker = try ChildProcess(
          ["worker", "--database", TestDatabase.url ?? "", "--queue", queue.name, "--id", "w\(serial)"] + extra)
        try await worker.waitForLine("ready")
        return worker
      }
      var workers: [ChildProcess] = []
      var everyWorker: [ChildProcess] = []
      defer { for worker in everyWorker { worker.stop() } }
      for _ in 0..<3 {
        workers.append(try await startWorker())
      }
      everyWorker = workers

      let input = TreeKind.Input(depth: 3, width: width, label: "r", leafSleepMilliseconds: 1_000, steps: true)
      let handle = try await queue.enqueue(TreeKind.self, input, idempotencyKey: "r")
      let root = Task { try await handle.result() }
      defer { root.cancel() }
      var plan = Fault.allCases.flatMap { Array(repeating: $0, count: faultsPerKind) }
      plan.shuffle(using: &random)
      var report = Report()
      var kills: [(pid: Int32, time: Double)] = []
      for fault in plan {
        try await Task.sleep(for: .milliseconds(Int.random(in: 500...2_500, using: &random)))
        if try await Self.isFinal(client, queue: queue.name, key: "r") { break }
        let victim = Int.random(in: 0..<workers.count, using: &random)
        switch fault {
        case .kill:
          kills.append((workers[victim].process.processIdentifier, Date().timeIntervalSince1970))
          workers[victim].signal(SIGKILL)
          workers[victim] = try await startWorker()
          everyWorker.append(workers[victim])
        case .stop:
          workers[victim].signal(SIGSTOP)
          try await Task.sleep(for: .milliseconds(Int((lease + 1.5) * 1000)))
          workers[victim].signal(SIGCONT)
        case .restart:
          #expect(ServerControl.run("-m", "fast", "restart") == 0)
        }
        report.faults[fault.rawValue, default: 0] += 1
      }
      let output = try await Self.value(of: root, within: .seconds(300))

      // A tree cancelled while a process running part of it is dead.
      let cancelledInput = TreeKind.Input(depth: 2, width: 3, label: "x", leafSleepMilliseconds: 30_000, steps: true)
      let cancelled = try await queue.enqueue(TreeKind.self, cancelledInput, idempotencyKey: "x")
      try await TestDatabase.eventually("the tree x runs", timeout: .seconds(60)) {
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        return rows.filter { $0.key.hasPrefix("x") && $0.value.state == "running" }.count >= 4
      }
      let victim = Int.random(in: 0..<workers.count, using: &random)
      kills.append((workers[victim].process.processIdentifier, Date().timeIntervalSince1970))
      workers[victim].signal(SIGKILL)
      report.faults[Fault.kill.rawValue, default: 0] += 1
      try await cancelled.cancel()
      workers[victim] = try await startWorker()
      everyWorker.append(workers[victim])
      // Its running rows end within a heartbeat, the dead process's once their lease expired.
      // The checker says what is still live if this wait runs out.
      try? await TestDatabase.eventually("no row of x is available or running", timeout: .seconds(30)) {
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        return !rows.contains {
          $0.key.hasPrefix("x") && ($0.value.state == "available" || $0.value.state == "running")
        }
      }
      for worker in everyWorker { worker.stop() }
      for worker in everyWorker { _ = try? await worker.waitForExit(timeout: .seconds(10)) }

      let rows = try await Self.finalRows(client, queue: queue.name)
      let events = try CrashHistoryLog.read(directory: directory)
      report.violations = CrashHistory.check(
        events: events, rows: rows, rootKey: "r", rootOutput: output?.joined(separator: ","),
        expectedOutput: TestSupport.expectedLeaves(input).joined(separator: ","), cancelledRoot: "x")
      report.recoveries = Self.recoveries(kills: kills, events: events, rows: rows)
      for event in events {
        switch event {
        case .start: report.events.starts += 1
        case .delivery: report.events.deliveries += 1
        case .stepBody: report.events.steps += 1
        }
      }
      report.seconds = Date().timeIntervalSince(started)
      return report
    }
  }

  /// Whether row `key` is final.
  static func isFinal(_ client: PostgresClient, queue: String, key: String) async throws -> Bool {
    do {
      let rows = try await TestDatabase.rows(client, queue: queue)
      return rows[key].map { ["completed", "failed", "cancelled"].contains($0.state) } ?? false
    } catch {
      return false  // the server restarts
    }
  }

  /// The root's output, `nil` if it failed or did not come within `timeout`.
  static func value(of root: Task<[String], any Error>, within timeout: Duration) async throws -> [String]? {
    try await withThrowingTaskGroup(of: [String]?.self) { group in
      group.addTask { try? await root.value }
      group.addTask {
        try await Task.sleep(for: timeout)
        Issue.record("the root did not finish within \(timeout)")
        // Its wait ends with the cancel, so that the group can end.
        root.cancel()
        return nil
      }
      let output = try await group.next() ?? nil
      group.cancelAll()
      return output
    }
  }

  /// The queue's rows, their outputs normalised as the deliveries record them.
  static func finalRows(_ client: PostgresClient, queue: String) async throws -> [CrashHistory.Row] {
    let result = try await client.query(
      """
      SELECT t.idempotency_key, t.kind, t.state, t.attempt, extract(epoch FROM t.finished_at)::float8,
        p.idempotency_key, t.output
      FROM jobkit_remote_tasks t LEFT JOIN jobkit_remote_tasks p ON p.id = t.parent_id
      WHERE t.queue = \(queue)
      """)
    var rows: [CrashHistory.Row] = []
    let decoder = JSONDecoder()
    for try await (key, kind, state, attempt, finished, parent, output) in result.decode(
      (String, String, String, Int32, Double?, String?, Data?).self)
    {
      let value: String? = output.flatMap { data in
        switch kind {
        case TreeKind.name: return (try? decoder.decode([String].self, from: data))?.joined(separator: ",")
        case EchoKind.name: return (try? decoder.decode(EchoKind.Output.self, from: data))?.text
        default: return try? decoder.decode(String.self, from: data)
        }
      }
      rows.append(
        CrashHistory.Row(
          key: key, kind: kind, state: state, attempt: Int(attempt), finishedAt: finished, parentKey: parent,
          output: value))
    }
    return rows
  }

  /// For each `kill -9`: how long until every row its process had started (and that was not final
  /// then) started again in another process.
  static func recoveries(
    kills: [(pid: Int32, time: Double)], events: [CrashHistory.Event], rows: [CrashHistory.Row]
  ) -> [Double] {
    var finished: [String: Double] = [:]
    for row in rows { finished[row.key] = row.finishedAt }
    var starts: [(key: String, time: Double, pid: Int32)] = []
    for case .start(let key, _, let time, let pid) in events { starts.append((key, time, pid)) }
    return kills.compactMap { kill -> Double? in
      let held = Set(
        starts.filter { $0.pid == kill.pid && $0.time < kill.time && (finished[$0.key] ?? .infinity) > kill.time }
          .map(\.key))
      let waits = held.compactMap { key in
        starts.filter { $0.key == key && $0.time > kill.time }.map(\.time).min().map { $0 - kill.time }
      }
      return waits.max()
    }
  }

  static func percentiles(_ values: [Double]) -> String {
    guard !values.isEmpty else { return "(none)" }
    let sorted = values.sorted()
    func format(_ value: Double) -> String { String(format: "%.1f s", value) }
    let p99 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    return "p50 \(format(sorted[sorted.count / 2])), p99 \(format(p99)), max \(format(sorted.last!)) "
      + "over \(values.count)"
  }
}
