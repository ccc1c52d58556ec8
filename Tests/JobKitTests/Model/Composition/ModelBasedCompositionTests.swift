import Foundation
import JobKit
import Testing

/// The model-based random test of the composition layer (issue 23): seeded random trees mixing
/// `CompositionJob`s (JobController), `ConcurrentGroup`, `SequentialGroup`, `Pipeline`,
/// `CommandQueue` (both modes, paused adds) and `CommandMap` dispatches, nested both ways, with
/// retries, timeouts and limits, and cancel, fail, cancelAll and pause storms from other threads
/// at random moments; checked against `CompositionModel`.
///
/// Settings: those of `ModelBasedConfig` (`JOBKIT_SEED`, `JOBKIT_MODEL_WORKFLOWS`,
/// `JOBKIT_MODEL_FIRST`, `JOBKIT_MODEL_REPEAT`, `JOBKIT_MODEL_TRACE`, hang and leak limits), with
/// `JOBKIT_COMPOSITION_WORKFLOWS=n` to run another count than the core test; and
/// `JOBKIT_COMPOSITION_OFF` / `JOBKIT_COMPOSITION_ON` (see `CompositionFeature`).
@Suite("ModelBased composition workflows")
struct ModelBasedCompositionTests {
  /// Invariants: every operation made finishes, its completion block runs once; outcomes are
  /// ones the model allows; a node nothing stopped runs exactly once (a retried leaf as often as
  /// its plan says), a pipeline runs its steps in order and its `onError` once exactly when a step
  /// failed; sequential containers run one child at a time in the order added; limits and
  /// `maxRunning` hold; a job's completions and `allTasksFinished` run once; `onDrained` reports
  /// each failed command once and `drained()` returns only after the commands added before it;
  /// containers finish after everything below them; no misuse is reported; no hang, no leak.
  @Test("Random composition trees follow the model")
  func randomCompositionsFollowTheModel() async throws {
    var config = ModelBasedConfig.fromEnvironment()
    let environment = ProcessInfo.processInfo.environment
    if environment["JOBKIT_SEED"] == nil, let count = environment["JOBKIT_COMPOSITION_WORKFLOWS"].flatMap(UInt64.init) {
      let first = config.seeds.first ?? 0
      config.seeds = Array(first..<(first + count))
    }
    let features = CompositionFeature.fromEnvironment()
    let began = Date()
    var parked: [RunningComposition] = []
    var leaks = LeakWatch()
    var failing: [UInt64: [String]] = [:]
    var reported = 0
    var count = 0
    var stats = CompositionStats()

    func report(_ seed: UInt64, _ description: String, _ violations: [String]) {
      failing[seed, default: []] += violations
      reported += 1
      guard reported <= 25 else { return }
      let text =
        "composition seed \(seed) broke the model:\n"
        + violations.prefix(12).map { "  - \($0)" }.joined(separator: "\n")
        + "\nreplay: JOBKIT_SEED=\(seed) swift test --filter ModelBasedComposition\n\(description)"
      Issue.record(Comment(rawValue: text))
    }
    func settle(_ running: RunningComposition) {
      let result = CompositionRunner.finish(running, stats: &stats)
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
          let result = CompositionRunner.hang(running, seconds: config.hangSeconds)
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
        let plan = CompositionGenerator.plan(seed: seed, features: features)
        if config.trace { FileHandle.standardError.write(Data("ModelBasedComposition: \(plan.summary)\n".utf8)) }
        let running = CompositionRunner.start(plan)
        count += 1
        await running.box.wait(seconds: 0.25)
        // Completion blocks run on a global queue after the root finished: a short bounded poll.
        for _ in 0..<50 where running.box.outcome != nil && !running.isDone {
          try await Task.sleep(for: .milliseconds(1))
        }
        if running.isDone { settle(running) } else { parked.append(running) }
        checkParked(final: false)
      }
    }
    while !parked.isEmpty || !leaks.isEmpty {
      if let first = parked.first, first.box.outcome == nil {
        await first.box.wait(seconds: 0.05)
      } else {
        try await Task.sleep(for: .milliseconds(5))  // a bounded poll of completions and weak references
      }
      let allExpired = parked.allSatisfy { -$0.started.timeIntervalSinceNow > config.hangSeconds }
      checkParked(final: allExpired && !parked.isEmpty)
    }
    let seconds = -began.timeIntervalSinceNow
    let seeds = failing.keys.sorted()
    print(
      "ModelBasedComposition: \(count) workflow(s) in \(String(format: "%.1f", seconds)) s (\(stats));"
        + " failing seeds: \(seeds)")
    for seed in seeds.prefix(60) {
      let kinds = Set(failing[seed, default: []].map(Self.kind)).sorted().joined(separator: " | ")
      print("ModelBasedComposition: seed \(seed): \(kinds)")
    }
    if reported > 25 {
      Issue.record(
        Comment(rawValue: "\(seeds.count) failing composition seeds in all (first 25 reported above): \(seeds)"))
    }
  }

  /// A violation's kind, for the one-line-per-seed summary: its text without node numbers.
  private static func kind(_ violation: String) -> String {
    let line = violation.split(separator: "\n").first.map(String.init) ?? violation
    return String(line.replacing(/n\d+(#\d+)?/, with: "n_").replacing(/\d+/, with: "#").prefix(90))
  }
}
