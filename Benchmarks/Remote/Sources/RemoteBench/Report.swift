import Foundation

/// Runs every measurement and writes the markdown table.
enum Report {
  static func measure(_ bench: Bench) async throws -> String {
    let settings = bench.settings
    let counts = settings.workerCounts
    let modes = settings.durabilities
    // Per durability and worker count, one figure per round. Within a round every durability and
    // worker count runs in turn, and the library and the floor alternate which drains first, so
    // that a neighbour's load hits all alike.
    func empty<T>() -> [[[T]]] { modes.map { _ in counts.map { _ in [] } } }
    var library: [[[RunFigures]]] = empty()
    var floor: [[[RunFigures]]] = empty()
    var endToEnd: [[[RunFigures]]] = empty()
    var latencies: [[Duration]] = modes.map { _ in [] }
    for round in 1...settings.rounds {
      for (mode, durable) in modes.enumerated() {
        let name = durable ? "on" : "off"
        try await bench.setDurability(durable)
        for (index, workers) in counts.enumerated() {
          for libraryFirst in round % 2 == 1 ? [true, false] : [false, true] {
            progress(
              "round \(round), durability \(name): drain, \(workers) \(libraryFirst ? "RemoteWorker" : "floor") process(es)"
            )
            let figures = try await bench.drain(library: libraryFirst, workers: workers, tag: "\(name)-\(round)")
            if libraryFirst { library[mode][index].append(figures) } else { floor[mode][index].append(figures) }
          }
          if !settings.drainOnly {
            progress("round \(round), durability \(name): end to end, a job and \(workers) RemoteWorker process(es)")
            endToEnd[mode][index].append(try await bench.endToEnd(workers: workers, tag: "\(name)-\(round)"))
          }
        }
        if !settings.drainOnly {
          progress("round \(round), durability \(name): latency, \(settings.samples) tasks one at a time, 1 worker")
          latencies[mode] += try await bench.latencies(tag: "\(name)-\(round)")
        }
      }
    }

    let countLabel =
      bench.counter.source == .statements
      ? "statements per task (pg_stat_statements: round trips)"
      : "transactions per task (pg_stat_database; an estimate of round trips)"
    var lines: [String] = []
    lines.append(
      "\(settings.tasks) no-op tasks per run, batch \(settings.batch), "
        + "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(settings.rounds) round(s) "
        + "(medians; a ratio row lists each round's ratio)"
        + (settings.kindLimit.map { "; the library's drains under a kind limit of \($0) across workers" } ?? ""))
    for (mode, durable) in modes.enumerated() {
      lines.append("")
      lines.append(
        durable
          ? "Durability on (fsync, synchronous_commit, full_page_writes on: what a user runs):"
          : "Durability off (fsync, synchronous_commit, full_page_writes off: the test server):")
      lines.append("")
      lines.append("| | " + counts.map { "\($0) worker\($0 == 1 ? "" : "s")" }.joined(separator: " | ") + " |")
      lines.append("|---|" + counts.map { _ in "---:|" }.joined())
      func row(_ label: String, _ values: [String]) {
        lines.append("| \(label) | " + values.joined(separator: " | ") + " |")
      }
      /// The median of each round's `numerator / denominator`, and the rounds' ratios.
      func ratios(_ numerator: [[RunFigures]], _ denominator: [[RunFigures]]) -> [String] {
        zip(numerator, denominator).map { numerator, denominator in
          let each = zip(numerator, denominator).map { $0.tasksPerSecond / $1.tasksPerSecond }
          return format(median(each), 2)
            + (each.count > 1 ? " (" + each.map { format($0, 2) }.joined(separator: ", ") + ")" : "")
        }
      }
      func rate(_ figures: [[RunFigures]]) -> [String] {
        figures.map { format(median($0.map(\.tasksPerSecond)), 0) }
      }
      func statements(_ figures: [[RunFigures]]) -> [String] {
        figures.map { format(median($0.map(\.statementsPerTask)), 2) }
      }
      /// The total's median, and the median of each side (workers, job, server).
      func cpu(
        _ figures: [[RunFigures]], job: Bool, _ side: KeyPath<RunFigures, CPUSeconds> = \.cpuPerThousand
      ) -> [String] {
        figures.map { runs in
          let parts = runs.map { $0[keyPath: side] }
          let sides =
            "w \(format(median(parts.map(\.workers)), 2))"
            + (job ? " + j \(format(median(parts.map(\.job)), 2))" : "")
            + " + s \(format(median(parts.map(\.server)), 2))"
          return "\(format(median(parts.map(\.total)), 2)) (\(sides))"
        }
      }
      row("drain, RemoteWorker (tasks/s)", rate(library[mode]))
      row("drain, postgres-nio floor loop (tasks/s)", rate(floor[mode]))
      row("RemoteWorker / floor (target >= 0.8)", ratios(library[mode], floor[mode]))
      if !settings.drainOnly {
        row("end to end, job + RemoteWorkers (tasks/s)", rate(endToEnd[mode]))
        row("end to end / drain (target >= 0.8)", ratios(endToEnd[mode], library[mode]))
      }
      row("\(countLabel), drain, RemoteWorker", statements(library[mode]))
      row("\(countLabel), drain, floor", statements(floor[mode]))
      if !settings.drainOnly {
        row("\(countLabel), end to end (job and workers)", statements(endToEnd[mode]))
      }
      row("CPU s per 1,000 tasks, drain, RemoteWorker (workers + server)", cpu(library[mode], job: false))
      row("CPU s per 1,000 tasks, drain, floor (workers + server)", cpu(floor[mode], job: false))
      row(
        "waiting for a core, s per 1,000 tasks, drain, RemoteWorker (workers + server)",
        cpu(library[mode], job: false, \.waitPerThousand))
      if !settings.drainOnly {
        row("CPU s per 1,000 tasks, end to end (workers + job + server)", cpu(endToEnd[mode], job: true))
        row(
          "waiting for a core, s per 1,000 tasks, end to end (workers + job + server)",
          cpu(endToEnd[mode], job: true, \.waitPerThousand))
      }
      func cores(_ figures: [[RunFigures]]) -> [String] {
        figures.map { format(median($0.map(\.busyCores)), 2) }
      }
      row("machine's busy cores, drain, RemoteWorker (every process)", cores(library[mode]))
      if !settings.drainOnly {
        row("machine's busy cores, end to end (every process)", cores(endToEnd[mode]))
        let sorted = latencies[mode].sorted()
        lines.append("")
        lines.append(
          "Latency, trackAndQueue to completion, idle queue, 1 worker, \(sorted.count) tasks one at a time: "
            + "p50 \(milliseconds(percentile(sorted, 0.5))) ms, p99 \(milliseconds(percentile(sorted, 0.99))) ms, "
            + "max \(milliseconds(sorted.last ?? .zero)) ms (goal: p50 <= 5 ms)")
      }
    }
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
