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
    var parked: [RunningWorkflow] = []
    var leaks = LeakWatch()
    var failing: [UInt64: [String]] = [:]
    var shapes: [UInt64: [Int]] = [:]
    var reported = 0
    var count = 0

    func report(_ seed: UInt64, _ description: String, _ violations: [String]) {
      failing[seed, default: []] += violations
      reported += 1
      guard reported <= 25 else { return }
      let text =
        "workflow seed \(seed) broke the model:\n" + violations.prefix(12).map { "  - \($0)" }.joined(separator: "\n")
        + "\nreplay: JOBKIT_SEED=\(seed) swift test --filter ModelBased\n\(description)"
      Issue.record(Comment(rawValue: text))
    }
    func settle(_ running: RunningWorkflow) {
      let result = WorkflowRunner.finish(running)
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
          let result = WorkflowRunner.hang(running, seconds: config.hangSeconds)
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
        let plan = WorkflowGenerator.plan(seed: seed, skip: config.skip, deepProgress: config.deepProgress)
        if config.trace { FileHandle.standardError.write(Data("ModelBased: workflow \(plan.summary)\n".utf8)) }
        shapes[seed] = plan.shapes.sorted()
        let running = await WorkflowRunner.start(plan)
        count += 1
        for box in running.boxes { await box.wait(seconds: 0.25) }
        if running.isDone { settle(running) } else { parked.append(running) }
        checkParked(final: false)
      }
    }
    while !parked.isEmpty || !leaks.isEmpty {
      if let first = parked.first {
        for box in first.boxes { await box.wait(seconds: 0.05) }
      } else {
        try await Task.sleep(for: .milliseconds(5))  // a bounded poll of the weak references
      }
      let allExpired = parked.allSatisfy { -$0.started.timeIntervalSinceNow > config.hangSeconds }
      checkParked(final: allExpired && !parked.isEmpty)
    }
    let seconds = -began.timeIntervalSinceNow
    let seeds = failing.keys.sorted()
    print(
      "ModelBased: \(count) workflow(s) in \(String(format: "%.1f", seconds)) s; failing seeds: \(seeds)"
        + (config.skip.isEmpty ? "" : "; skipped shapes \(config.skip.sorted())"))
    for seed in seeds {
      let kinds = Set(failing[seed, default: []].map(Self.kind)).sorted().joined(separator: ", ")
      print("ModelBased: seed \(seed) shapes \(shapes[seed] ?? []): \(kinds)")
    }
    if reported > 25 {
      Issue.record(Comment(rawValue: "\(seeds.count) failing seeds in all (first 25 reported above): \(seeds)"))
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
