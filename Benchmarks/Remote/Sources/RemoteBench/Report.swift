import Foundation

/// Runs every measurement and writes the markdown table.
enum Report {
  static func measure(_ bench: Bench) async throws -> String {
    let settings = bench.settings
    // Per worker count, one figure per round; the library and the floor alternate which drains
    // first, so that a neighbour's load hits both alike.
    var library: [[RunFigures]] = settings.workerCounts.map { _ in [] }
    var floor: [[RunFigures]] = settings.workerCounts.map { _ in [] }
    for round in 1...settings.rounds {
      for (index, workers) in settings.workerCounts.enumerated() {
        for libraryFirst in round % 2 == 1 ? [true, false] : [false, true] {
          progress("round \(round): drain, \(workers) \(libraryFirst ? "RemoteWorker" : "floor") process(es)")
          let figures = try await bench.drain(library: libraryFirst, workers: workers, round: round)
          if libraryFirst { library[index].append(figures) } else { floor[index].append(figures) }
        }
      }
    }
    var endToEnd: [RunFigures] = []
    var latencies: [Duration] = []
    if !settings.drainOnly {
      for workers in settings.workerCounts {
        progress("end to end, a job and \(workers) RemoteWorker process(es)")
        endToEnd.append(try await bench.endToEnd(workers: workers))
      }
      progress("latency, \(settings.samples) tasks one at a time, 1 worker")
      latencies = try await bench.latencies().sorted()
    }
    /// The ratio of each round, and their median.
    let ratios = zip(library, floor).map { library, floor in
      zip(library, floor).map { $0.tasksPerSecond / $1.tasksPerSecond }
    }

    let countLabel =
      bench.counter.source == .statements
      ? "statements per task (pg_stat_statements: round trips)"
      : "transactions per task (pg_stat_database; an estimate of round trips)"
    var lines: [String] = []
    lines.append(
      "\(settings.tasks) no-op tasks per run, batch \(settings.batch), \(ProcessInfo.processInfo.activeProcessorCount) cores, "
        + "\(settings.rounds) round(s) (medians; the ratio row lists each round's ratio)"
    )
    lines.append("")
    lines.append(
      "| | " + settings.workerCounts.map { "\($0) worker\($0 == 1 ? "" : "s")" }.joined(separator: " | ") + " |")
    lines.append("|---|" + settings.workerCounts.map { _ in "---:|" }.joined())
    func row(_ label: String, _ values: [String]) {
      lines.append("| \(label) | " + values.joined(separator: " | ") + " |")
    }
    row("drain, RemoteWorker (tasks/s)", library.map { format(median($0.map(\.tasksPerSecond)), 0) })
    row("drain, postgres-nio floor loop (tasks/s)", floor.map { format(median($0.map(\.tasksPerSecond)), 0) })
    row(
      "RemoteWorker / floor (target >= 0.8)",
      ratios.map { ratios in
        format(median(ratios), 2)
          + (ratios.count > 1 ? " (" + ratios.map { format($0, 2) }.joined(separator: ", ") + ")" : "")
      })
    row("\(countLabel), drain, RemoteWorker", library.map { format(median($0.map(\.statementsPerTask)), 2) })
    row("\(countLabel), drain, floor", floor.map { format(median($0.map(\.statementsPerTask)), 2) })
    guard !settings.drainOnly else { return lines.joined(separator: "\n") }
    row("end to end, job + RemoteWorkers (tasks/s)", endToEnd.map { format($0.tasksPerSecond, 0) })
    row("\(countLabel), end to end (job and workers)", endToEnd.map { format($0.statementsPerTask, 2) })
    lines.append("")
    lines.append(
      "Latency, trackAndQueue to completion, idle queue, 1 worker, \(latencies.count) tasks one at a time: "
        + "p50 \(milliseconds(percentile(latencies, 0.5))) ms, p99 \(milliseconds(percentile(latencies, 0.99))) ms, "
        + "max \(milliseconds(latencies.last ?? .zero)) ms (goal: p50 <= 5 ms)")
    return lines.joined(separator: "\n")
  }

  /// The middle value (the mean of the two middle ones for an even count).
  static func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
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
