import Foundation
import JobKit
import Testing

/// The model-based random test of issue 15: seeded random workflows (jobs, nested jobs, groups,
/// pipelines, command dispatches, retries, timeouts, limits, failure policies, stops) run on real
/// queues and are checked against `WorkflowModel`, the documented routing rules. See the DocC
/// article RoutingAndThreads, "The model-based test".
@Suite("ModelBased workflows")
struct ModelBasedTests {
  /// Invariants: each tracked task's own callback runs once (at most once after a stop), group
  /// callbacks fire only at zero and as often as the rules fix, `allTasksFinished` runs as often
  /// as the plan refills plus one, callbacks never overlap, none starts after a stop from inside
  /// the job (at most one after a stop from another thread returned), `run()` ends as the model
  /// allows, progress ends at 1.0, no task outlives its job, and everything is freed.
  @Test("Random workflows follow the routing model")
  func randomWorkflowsFollowTheModel() async throws {
    let config = ModelBasedConfig.fromEnvironment()
    let began = Date()
    var shapes: [UInt64: [Int]] = [:]
    let outcome = try await ModelSeedLoop.run(
      "workflow", filter: "ModelBased", config: config,
      start: { seed in
        let plan = WorkflowGenerator.plan(seed: seed, skip: config.skip, deepProgress: config.deepProgress)
        if config.trace { FileHandle.standardError.write(Data("ModelBased: workflow \(plan.summary)\n".utf8)) }
        shapes[seed] = plan.shapes.sorted()
        return await WorkflowRunner.start(plan)
      },
      finish: WorkflowRunner.finish, hang: WorkflowRunner.hang)
    let seconds = -began.timeIntervalSinceNow
    let seeds = outcome.failing.keys.sorted()
    print(
      "ModelBased: \(outcome.count) workflow(s) in \(String(format: "%.1f", seconds)) s; failing seeds: \(seeds)"
        + (config.skip.isEmpty ? "" : "; skipped shapes \(config.skip.sorted())"))
    for seed in seeds {
      let kinds = Set(outcome.failing[seed, default: []].map(Self.kind)).sorted().joined(separator: ", ")
      print("ModelBased: seed \(seed) shapes \(shapes[seed] ?? []): \(kinds)")
    }
  }

  /// A violation's kind, for the one-line-per-seed summary.
  private static func kind(_ violation: String) -> String {
    let text = violation.split(separator: ":", maxSplits: 1).last.map(String.init) ?? violation
    for (needle, kind) in [
      ("hang", "hang"), ("unfinished job", "hang"), ("not freed", "leak"), ("progress ended", "progress<1"),
      ("ended with", "outcome"),
      ("exactly once", "own callbacks"), ("fired", "group callbacks"),
      ("allTasksFinished ran", "allTasksFinished count"),
      ("entered while", "overlap"), ("after the job stopped itself", "callback after inside stop"),
      ("cancelled before its queue", "ran after cancel before start"), ("still ran", "task outlived job"),
    ] where violation.contains(needle) {
      return kind
    }
    return String(text.prefix(60)).replacingOccurrences(of: "\n", with: " ")
  }
}
