import Foundation
import JobKit
import Testing

/// The model-based random test of the composition layer (issue 23): seeded random trees mixing
/// `CompositionJob`s (JobController), `ConcurrentGroup`, `SequentialGroup`, `Pipeline`,
/// `CommandQueue` (both modes, paused adds) and `CommandMap` dispatches, nested both ways, with
/// retries, timeouts and limits, and cancel, fail, cancelAll, pause and suspend storms from other threads
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
  /// each failed command once and `drained()` returns only after the commands added before it
  /// (their `add` returned) finished and `onDrained` reported their failures;
  /// containers finish after everything below them; no misuse is reported; no hang, no leak. A
  /// cancel storm may also cancel the groups above its target, up to the first container that
  /// is not a group (issue 20: a task that cancels itself cancels its group).
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
    var stats = CompositionStats()
    let outcome = try await ModelSeedLoop.run(
      "composition", filter: "ModelBasedComposition", config: config,
      start: { seed in
        let plan = CompositionGenerator.plan(seed: seed, features: features)
        if config.trace { FileHandle.standardError.write(Data("ModelBasedComposition: \(plan.summary)\n".utf8)) }
        return CompositionRunner.start(plan)
      },
      finish: { CompositionRunner.finish($0, stats: &stats) }, hang: CompositionRunner.hang)
    let seconds = -began.timeIntervalSinceNow
    let seeds = outcome.failing.keys.sorted()
    print(
      "ModelBasedComposition: \(outcome.count) workflow(s) in \(String(format: "%.1f", seconds)) s (\(stats));"
        + " failing seeds: \(seeds)")
    for seed in seeds.prefix(60) {
      let kinds = Set(outcome.failing[seed, default: []].map(Self.kind)).sorted().joined(separator: " | ")
      print("ModelBasedComposition: seed \(seed): \(kinds)")
    }
  }

  /// A violation's kind, for the one-line-per-seed summary: its text without node numbers.
  private static func kind(_ violation: String) -> String {
    let line = violation.split(separator: "\n").first.map(String.init) ?? violation
    return String(line.replacing(/n\d+(#\d+)?/, with: "n_").replacing(/\d+/, with: "#").prefix(90))
  }
}
