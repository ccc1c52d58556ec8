import Foundation
import Testing

/// A started model-based workflow, as `ModelSeedLoop` follows it until it is done or hangs.
protocol ModelRunning {
  /// When the workflow was started: the hang limit counts from here.
  var started: Date { get }
  /// The roots ended and everything the checks read arrived: the workflow can be checked.
  var isDone: Bool { get }
  /// The roots ended (what else `isDone` waits for may still be arriving).
  var rootsEnded: Bool { get }
  /// Suspends until the roots ended or `seconds` passed.
  func waitForRoots(seconds: Double) async
}

/// What a model-based test's seeds came to.
struct ModelSeedOutcome {
  /// How many workflows ran.
  var count = 0
  /// The violations of each failing seed.
  var failing: [UInt64: [String]] = [:]
  /// How many workflows broke the model (the first 25 are recorded as issues).
  var reported = 0
}

/// The seed loop of the model-based tests: runs each seed's workflow `config.repeats` times,
/// checks a done one at once and parks the others, checks parked ones as they finish, reports a
/// workflow that outlives the hang limit and objects still alive `config.leakSeconds` after
/// their workflow was checked, and records the first 25 failing workflows as issues (with the
/// `JOBKIT_SEED` line that replays each) and, past 25, one issue listing every failing seed.
enum ModelSeedLoop {
  /// - Parameters:
  ///   - noun: what a workflow is called in the reports ("workflow", "composition").
  ///   - filter: the `swift test --filter` of the replay line.
  ///   - start: makes seed's workflow and starts it.
  ///   - finish: checks a done workflow.
  ///   - hang: the violations of a workflow that outlived the hang limit.
  static func run<Running: ModelRunning>(
    _ noun: String, filter: String, config: ModelBasedConfig,
    start: (UInt64) async -> Running,
    finish: (Running) -> WorkflowResult,
    hang: (Running, Double) -> WorkflowResult
  ) async throws -> ModelSeedOutcome {
    var outcome = ModelSeedOutcome()
    var parked: [Running] = []
    var leaks = LeakWatch()

    func report(_ seed: UInt64, _ description: String, _ violations: [String]) {
      outcome.failing[seed, default: []] += violations
      outcome.reported += 1
      guard outcome.reported <= 25 else { return }
      let text =
        "\(noun) seed \(seed) broke the model:\n" + violations.prefix(12).map { "  - \($0)" }.joined(separator: "\n")
        + "\nreplay: JOBKIT_SEED=\(seed) swift test --filter \(filter)\n\(description)"
      Issue.record(Comment(rawValue: text))
    }
    func settle(_ running: Running) {
      let result = finish(running)
      if !result.violations.isEmpty { report(result.seed, result.description, result.violations) }
      leaks.add(result, seconds: config.leakSeconds)
    }
    func checkParked(final: Bool) {
      parked = parked.filter { running in
        if running.isDone {
          settle(running)
          return false
        }
        if final || -running.started.timeIntervalSinceNow > config.hangSeconds {
          let result = hang(running, config.hangSeconds)
          report(result.seed, result.description, result.violations)
          return false
        }
        return true
      }
      for (seed, description, labels) in leaks.expired() {
        report(
          seed, description, ["not freed \(Int(config.leakSeconds)) s after the workflow finished: \(labels.prefix(8))"]
        )
      }
    }

    for seed in config.seeds {
      for _ in 0..<config.repeats {
        let running = await start(seed)
        outcome.count += 1
        await running.waitForRoots(seconds: 0.25)
        // Completion blocks may run on a global queue after the roots ended: a short bounded poll.
        for _ in 0..<50 where running.rootsEnded && !running.isDone {
          try await Task.sleep(for: .milliseconds(1))
        }
        if running.isDone { settle(running) } else { parked.append(running) }
        checkParked(final: false)
      }
    }
    while !parked.isEmpty || !leaks.isEmpty {
      if let first = parked.first, !first.rootsEnded {
        await first.waitForRoots(seconds: 0.05)
      } else {
        try await Task.sleep(for: .milliseconds(5))  // a bounded poll of completions and weak references
      }
      let allExpired = parked.allSatisfy { -$0.started.timeIntervalSinceNow > config.hangSeconds }
      checkParked(final: allExpired && !parked.isEmpty)
    }
    if outcome.reported > 25 {
      let seeds = outcome.failing.keys.sorted()
      Issue.record(
        Comment(rawValue: "\(seeds.count) failing \(noun) seeds in all (first 25 reported above): \(seeds)"))
    }
    return outcome
  }
}
