import Foundation
import JobKit
import JobKitTesting
import Testing

// The build graph of the DocC article "A Build Graph Discovered While It Runs" (ABuildGraph.md):
// the JobKit version and the `withTaskGroup` version, as printed there, then a test that checks
// both against the graph. Keep them in step with the article.

// MARK: The JobKit version (article)

final class Build: Work<Void>, @unchecked Sendable {}  // a group of its own, for the limit

final class BuildGraph: JobController, @unchecked Sendable {
  // @unchecked Sendable: configured before the start; then only main() and the callbacks (one at
  // a time) touch the vars.
  var roots: [String] = []
  var scan: @Sendable (String) -> [String] = { _ in [] }
  var compile: @Sendable (String) throws -> Void = { _ in }
  private var builds: [String: Build] = [:]
  private(set) var built: [String] = [], failed: [String] = [], skipped: [String] = []

  override func main() {
    setMaxConcurrentTasks(3, forGroup: Build.self)
    for target in roots { _ = build(of: target) }
  }

  /// The target's build, made (and its scan tracked) the first time a target is named.
  private func build(of target: String) -> Build {
    if let known = builds[target] { return known }
    let step = Build { [compile] in try compile(target) }
    step.name = target
    builds[target] = step
    trackAndQueue(resultOf: Work { [scan] in scan(target) }) { [self] scanned in
      let dependencies = ((try? scanned.get()) ?? []).map { build(of: $0) }
      trackAndQueue(resultOf: step, after: dependencies) { [self] result in
        switch result {
        case .success: built.append(target)
        case .failure(let error as JobKitError) where error.code == .dependencyFailed: skipped.append(target)
        case .failure: failed.append(target)
        }
      }
    }
    return step
  }
}

// MARK: The withTaskGroup version (article)

func buildWithTaskGroup(
  roots: [String], scan: @escaping @Sendable (String) -> [String],
  compile: @escaping @Sendable (String) throws -> Void
) async -> (built: [String], failed: [String], skipped: [String]) {
  enum Event: Sendable {
    case scanned(String, [String])
    case compiled(String, succeeded: Bool)
  }
  var built: [String] = []
  var failed: [String] = []
  var skipped: [String] = []
  var dependencies: [String: [String]] = [:]  // scanned, not built, failed or skipped yet
  var succeeded: [String: Bool] = [:]  // built: true; failed or skipped: false
  var ready: [String] = []
  var running = 0
  await withTaskGroup(of: Event.self) { group in
    var seen = Set(roots)
    for root in roots { group.addTask { .scanned(root, scan(root)) } }
    while let event = await group.next() {
      switch event {
      case .scanned(let target, let found):
        dependencies[target] = found
        for dependency in found where seen.insert(dependency).inserted {
          group.addTask { .scanned(dependency, scan(dependency)) }
        }
      case .compiled(let target, let ok):
        running -= 1
        succeeded[target] = ok
        if ok { built.append(target) } else { failed.append(target) }
      }
      // The user's own bookkeeping: which targets are ready, which must be skipped.
      var changed = true
      while changed {
        changed = false
        for (target, needs) in dependencies where needs.allSatisfy({ succeeded[$0] != nil }) {
          dependencies[target] = nil
          changed = true
          if needs.allSatisfy({ succeeded[$0] == true }) {
            ready.append(target)
          } else {
            succeeded[target] = false
            skipped.append(target)
          }
        }
      }
      while running < 3, !ready.isEmpty {
        let target = ready.removeFirst()
        running += 1
        group.addTask {
          do {
            try compile(target)
            return .compiled(target, succeeded: true)
          } catch {
            return .compiled(target, succeeded: false)
          }
        }
      }
    }
  }
  return (built, failed, skipped)
}

// MARK: The test

@Suite("A build graph discovered while it runs (DocC: ABuildGraph)")
struct BuildGraphTests {
  private struct BuildError: Error {}

  /// 200 targets `t0`…`t199`, each depending only on higher-numbered ones (a DAG), every target
  /// reachable from `t0`; made from `seed`.
  private static func graph(seed: UInt64) -> [String: [String]] {
    var generator = SeededGenerator(seed: seed)
    var edges = [Set<Int>](repeating: [], count: 200)
    for child in 1..<200 {
      edges[Int.random(in: 0..<child, using: &generator)].insert(child)
    }
    for parent in 0..<199 {
      for _ in 0..<Int.random(in: 0...2, using: &generator) {
        edges[parent].insert(Int.random(in: (parent + 1)..<200, using: &generator))
      }
    }
    var graph: [String: [String]] = [:]
    for (index, children) in edges.enumerated() {
      graph["t\(index)"] = children.sorted().map { "t\($0)" }
    }
    return graph
  }

  /// Every target that depends on `failing`, directly or not.
  private static func dependants(of failing: String, in graph: [String: [String]]) -> Set<String> {
    var result = Set<String>()
    var changed = true
    while changed {
      changed = false
      for (target, dependencies) in graph where !result.contains(target) {
        if dependencies.contains(where: { $0 == failing || result.contains($0) }) {
          result.insert(target)
          changed = true
        }
      }
    }
    return result
  }

  /// What compiling recorded: each target's start and end, in order, and the most at once.
  private final class Recorder: @unchecked Sendable {
    // @unchecked Sendable: every field is only touched under `lock`.
    private let lock = NSLock()
    private var running = 0
    private(set) var peak = 0
    private(set) var log: [String] = []

    func compile(_ target: String, failing: String) throws {
      lock.withLock {
        log.append("start \(target)")
        running += 1
        peak = max(peak, running)
      }
      // A little work, so that builds overlap.
      var hash = 0
      for index in 0..<20_000 { hash = hash &* 31 &+ index }
      lock.withLock {
        running -= 1
        log.append("end \(target) \(hash & 1)")
      }
      if target == failing { throw BuildError() }
    }

    var snapshot: (log: [String], peak: Int) { lock.withLock { (log, peak) } }
  }

  @Test(arguments: [1 as UInt64, 2, 3])
  func theJobBuildsInOrderWithinTheLimitAndSkipsTheFailuresDependants(seed: UInt64) async throws {
    let graph = Self.graph(seed: seed)
    // A target deep enough to have dependants: the one with the most of them among t100…t149.
    let failing = (100..<150).map { "t\($0)" }.max {
      Self.dependants(of: $0, in: graph).count < Self.dependants(of: $1, in: graph).count
    }!
    let expectedSkipped = Self.dependants(of: failing, in: graph)
    #expect(!expectedSkipped.isEmpty)
    let recorder = Recorder()
    let scan: @Sendable (String) -> [String] = { graph[$0] ?? [] }
    let job = BuildGraph()
    (job.roots, job.scan) = (["t0"], scan)
    job.compile = { try recorder.compile($0, failing: failing) }
    try await job.run()

    #expect(job.failed == [failing])
    #expect(Set(job.skipped) == expectedSkipped && job.skipped.count == expectedSkipped.count)
    let expectedBuilt = Set(graph.keys).subtracting(expectedSkipped).subtracting([failing])
    #expect(Set(job.built) == expectedBuilt && job.built.count == expectedBuilt.count)
    let (log, peak) = recorder.snapshot
    #expect(peak <= 3)
    // Build order: a target starts only after each of its dependencies ended.
    var position: [String: Int] = [:]
    for (index, entry) in log.enumerated() {
      position[entry.split(separator: " ").prefix(2).joined(separator: " ")] = index
    }
    for target in expectedBuilt.union([failing]) {
      for dependency in graph[target] ?? [] {
        #expect(
          position["end \(dependency)"]! < position["start \(target)"]!, "\(target) started before \(dependency) ended")
      }
    }
    for target in expectedSkipped {
      #expect(position["start \(target)"] == nil, "skipped \(target) ran")
    }
    #expect(job.misuses.isEmpty)

    // The withTaskGroup version of the article agrees.
    let other = await buildWithTaskGroup(roots: ["t0"], scan: scan) { target in
      if target == failing { throw BuildError() }
    }
    #expect(other.failed == [failing])
    #expect(Set(other.skipped) == expectedSkipped && Set(other.built) == expectedBuilt)
  }
}
