import Foundation

/// Runs every measurement and writes the markdown table.
enum Report {
  static func measure(_ bench: Bench) async throws -> String {
    let settings = bench.settings
    var library: [RunFigures] = []
    var floor: [RunFigures] = []
    var endToEnd: [RunFigures] = []
    for workers in settings.workerCounts {
      progress("drain, \(workers) RemoteWorker process(es)")
      library.append(try await bench.drain(library: true, workers: workers))
      progress("drain, \(workers) floor process(es)")
      floor.append(try await bench.drain(library: false, workers: workers))
      progress("end to end, a job and \(workers) RemoteWorker process(es)")
      endToEnd.append(try await bench.endToEnd(workers: workers))
    }
    progress("latency, \(settings.samples) tasks one at a time, 1 worker")
    let latencies = try await bench.latencies().sorted()

    let countLabel =
      bench.counter.source == .statements
      ? "statements per task (pg_stat_statements: round trips)"
      : "transactions per task (pg_stat_database; an estimate of round trips)"
    var lines: [String] = []
    lines.append(
      "\(settings.tasks) no-op tasks per run, batch \(settings.batch), \(ProcessInfo.processInfo.activeProcessorCount) cores"
    )
    lines.append("")
    lines.append(
      "| | " + settings.workerCounts.map { "\($0) worker\($0 == 1 ? "" : "s")" }.joined(separator: " | ") + " |")
    lines.append("|---|" + settings.workerCounts.map { _ in "---:|" }.joined())
    func row(_ label: String, _ values: [String]) {
      lines.append("| \(label) | " + values.joined(separator: " | ") + " |")
    }
    row("drain, RemoteWorker (tasks/s)", library.map { format($0.tasksPerSecond, 0) })
    row("drain, postgres-nio floor loop (tasks/s)", floor.map { format($0.tasksPerSecond, 0) })
    row(
      "RemoteWorker / floor (target >= 0.8)",
      zip(library, floor).map { format($0.tasksPerSecond / $1.tasksPerSecond, 2) })
    row("end to end, job + RemoteWorkers (tasks/s)", endToEnd.map { format($0.tasksPerSecond, 0) })
    row("\(countLabel), drain, RemoteWorker", library.map { format($0.statementsPerTask, 2) })
    row("\(countLabel), drain, floor", floor.map { format($0.statementsPerTask, 2) })
    row("\(countLabel), end to end (job and workers)", endToEnd.map { format($0.statementsPerTask, 2) })
    lines.append("")
    lines.append(
      "Latency, trackAndQueue to completion, idle queue, 1 worker, \(latencies.count) tasks one at a time: "
        + "p50 \(milliseconds(percentile(latencies, 0.5))) ms, p99 \(milliseconds(percentile(latencies, 0.99))) ms, "
        + "max \(milliseconds(latencies.last ?? .zero)) ms (goal: p50 <= 5 ms)")
    return lines.joined(separator: "\n")
  }

  /// The value below which a fraction `p` of the sorted `values` lie (nearest rank).
  static func percentile(_ values: [Duration], _ p: Double) -> Duration {
    guard !values.isEmpty else { return .zero }
    let rank = Int((Double(values.count) * p).rounded(.up))
    return values[min(values.count - 1, max(0, rank - 1))]
  }

  private static func milliseconds(_ duration: Duration) -> String {
    format(duration.seconds * 1000, 2)
  }

  private static func format(_ value: Double, _ decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
  }

  private static func progress(_ text: String) {
    FileHandle.standardError.write(Data("remote-bench: \(text)\n".utf8))
  }
}
