import Foundation

/// The model-based test's settings, from the environment:
/// - `JOBKIT_SEED=n`: run only workflow `n` (a replay), `JOBKIT_MODEL_REPEAT` times (default 1);
/// - `JOBKIT_MODEL_WORKFLOWS=n`: run workflows 0..<n (default 1,000; CI's long mode: 10,000);
/// - `JOBKIT_MODEL_FIRST=n`: start the range at workflow `n` instead of 0;
/// - `JOBKIT_MODEL_SKIP=2,4`: leave out those defect shapes (see `WorkflowGenerator`);
/// - `JOBKIT_MODEL_TRACE=1`: print each workflow's seed before it starts (to name the seed of a crash);
/// - `JOBKIT_MODEL_HANG_SECONDS=n`: the hang limit (default 60 s, 5 times that under ThreadSanitizer;
///   in a full parallel `swift test` the first workflows start while every suite's test bodies
///   queue on Swift's two cooperative threads, and an async `BlockTask` body of seed 0 was seen
///   to wait 20+ s for one: slow, not lost, it finished at a 90 s limit in every run);
struct ModelBasedConfig {
  var seeds: [UInt64]
  var repeats: Int
  var skip: Set<Int>
  var deepProgress: Bool
  var trace = ProcessInfo.processInfo.environment["JOBKIT_MODEL_TRACE"] == "1"
  /// How long a workflow may take before it counts as a hang.
  var hangSeconds: Double =
    ProcessInfo.processInfo.environment["JOBKIT_MODEL_HANG_SECONDS"].flatMap(Double.init)
    ?? ModelBasedConfig.defaultHangSeconds
  /// How long a finished workflow's objects may stay alive before they count as leaked.
  var leakSeconds: Double = 5 * ModelBasedConfig.slowdown

  /// The hang limit when `JOBKIT_MODEL_HANG_SECONDS` is not set (see above).
  static let defaultHangSeconds: Double = 60 * ModelBasedConfig.slowdown

  /// How much slower than a plain build this process runs: 5 under ThreadSanitizer (its runtime
  /// is linked in; it makes code 5 to 15 times slower), else 1. Only widens the time limits: a
  /// workflow that never finishes is still reported.
  static let slowdown: Double = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_init") != nil ? 5 : 1

  static func fromEnvironment() -> ModelBasedConfig {
    let environment = ProcessInfo.processInfo.environment
    let repeats = environment["JOBKIT_MODEL_REPEAT"].flatMap(Int.init) ?? 1
    let skip = Set((environment["JOBKIT_MODEL_SKIP"] ?? "").split(separator: ",").compactMap { Int($0) })
    // Shape 5 (deep progress trees) crashed the process before issue 15's fix; it is now generated
    // like every other shape (leave it out with JOBKIT_MODEL_SKIP=5).
    let deepProgress = !skip.contains(5)
    if let seed = environment["JOBKIT_SEED"].flatMap(UInt64.init) {
      return ModelBasedConfig(seeds: [seed], repeats: max(1, repeats), skip: skip, deepProgress: deepProgress)
    }
    let count = environment["JOBKIT_MODEL_WORKFLOWS"].flatMap(UInt64.init) ?? 1_000
    let first = environment["JOBKIT_MODEL_FIRST"].flatMap(UInt64.init) ?? 0
    let seeds = Array(first..<(first + count))
    return ModelBasedConfig(seeds: seeds, repeats: max(1, repeats), skip: skip, deepProgress: deepProgress)
  }
}

/// Objects of finished workflows that are still alive, each with a deadline.
struct LeakWatch {
  private var pending: [(seed: UInt64, description: String, refs: [WeakRef], deadline: Date)] = []

  /// Adds a finished workflow's objects, unless they are all freed already.
  mutating func add(_ result: WorkflowResult, seconds: Double) {
    let alive = result.watched.filter { $0.object != nil }
    if !alive.isEmpty { pending.append((result.seed, result.description, alive, Date(timeIntervalSinceNow: seconds))) }
  }

  /// Drops freed entries; returns the seeds (and labels) whose deadline passed with objects alive.
  mutating func expired(now: Date = Date()) -> [(UInt64, String, [String])] {
    var leaked: [(UInt64, String, [String])] = []
    pending = pending.compactMap { entry in
      let alive = entry.refs.filter { $0.object != nil }
      if alive.isEmpty { return nil }
      if entry.deadline < now {
        leaked.append((entry.seed, entry.description, alive.map(\.label)))
        return nil
      }
      return (entry.seed, entry.description, alive, entry.deadline)
    }
    return leaked
  }

  var isEmpty: Bool { pending.isEmpty }
}
