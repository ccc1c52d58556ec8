import Foundation
import JobKitTesting
import Testing

@testable import JobKit

@Suite("JobController dependencies stress")
struct TaskDependenciesStressTests {
  /// Shared by the tasks of one run: which tasks were routed, started, and each one's callbacks.
  private final class Board: @unchecked Sendable {
    // @unchecked Sendable: every field is only touched under `lock`.
    private let lock = NSLock()
    private var routed: [Bool]
    private var started: [Bool]
    private var completions: [Int]
    private var cancelledAtRouting: [Bool]
    private(set) var violations: [String] = []

    init(count: Int) {
      routed = Array(repeating: false, count: count)
      started = Array(repeating: false, count: count)
      completions = Array(repeating: 0, count: count)
      cancelledAtRouting = Array(repeating: false, count: count)
    }

    func start(_ index: Int, dependencies: [Int]) {
      lock.withLock {
        started[index] = true
        for dependency in dependencies where !routed[dependency] {
          violations.append("\(index) started before its dependency \(dependency) was routed")
        }
      }
    }

    func route(_ index: Int, cancelled: Bool) {
      lock.withLock {
        routed[index] = true
        completions[index] += 1
        cancelledAtRouting[index] = cancelled
      }
    }

    var snapshot: (started: [Bool], completions: [Int], cancelled: [Bool], violations: [String]) {
      lock.withLock { (started, completions, cancelledAtRouting, violations) }
    }
  }

  private final class Node: ConcurrentOperation, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    let index: Int
    let needs: [Int]
    let fails: Bool
    let finishesLater: Bool
    let board: Board

    init(_ index: Int, dependencies: [Int], fails: Bool, finishesLater: Bool, board: Board) {
      (self.index, self.needs, self.fails, self.finishesLater, self.board) =
        (index, dependencies, fails, finishesLater, board)
      super.init()
    }

    override func operationStart() {
      board.start(index, dependencies: needs)
      let error: (any Error)? = fails ? TestError(index) : nil
      if finishesLater {
        DispatchQueue.global().async { self.operationDone(error: error) }
      } else {
        operationDone(error: error)
      }
    }
  }

  /// Invariant: 3,000 tasks with random dependency DAGs (each on up to 3 earlier tasks), tracked
  /// in random order, half from `main()` and half from other tasks' callbacks (so many name a
  /// dependency the job tracks only later), 4% failing: every completion runs exactly once;
  /// a task runs iff none of its dependencies failed or was skipped, and is skipped (cancelled,
  /// never started) otherwise; no task starts before each of its dependencies was routed; the
  /// job reports the failures only, and no misuse.
  @Test(arguments: [11 as UInt64, 12, 13])
  func thousandsOfTasksWithRandomDependencies(seed: UInt64) async throws {
    let count = 3_000
    var generator = SeededGenerator(seed: seed)
    let board = Board(count: count)
    var dependencies: [[Int]] = []
    var fails: [Bool] = []
    var nodes: [Node] = []
    for index in 0..<count {
      let picks = index == 0 ? 0 : Int.random(in: 0...3, using: &generator)
      let dependsOn = Array(Set((0..<picks).map { _ in Int.random(in: 0..<index, using: &generator) })).sorted()
      dependencies.append(dependsOn)
      fails.append(Int.random(in: 0..<100, using: &generator) < 4)
      nodes.append(
        Node(
          index, dependencies: dependsOn, fails: fails[index], finishesLater: Bool.random(using: &generator),
          board: board))
    }
    let order = Array(0..<count).shuffled(using: &generator)
    let fromMain = Array(order.prefix(count / 2))
    // The other half is tracked by the callbacks of tasks from `main()` without dependencies
    // (a discoverer that waited could wait for a task only it discovers: a real deadlock).
    let discoverers = fromMain.filter { dependencies[$0].isEmpty }
    var discovered: [Int: [Int]] = [:]
    for (position, index) in order.dropFirst(count / 2).enumerated() {
      discovered[discoverers[position % discoverers.count], default: []].append(index)
    }

    final class Graph: JobController, @unchecked Sendable {
      // @unchecked Sendable: immutable after init.
      let nodes: [Node]
      let fromMain: [Int]
      let discovered: [Int: [Int]]
      let board: Board

      init(nodes: [Node], fromMain: [Int], discovered: [Int: [Int]], board: Board) {
        (self.nodes, self.fromMain, self.discovered, self.board) = (nodes, fromMain, discovered, board)
        super.init()
      }

      override func main() {
        for index in fromMain { track(index) }
      }

      private func track(_ index: Int) {
        let node = nodes[index]
        trackAndQueue(node, after: node.needs.map { nodes[$0] }) { [self] finished in
          board.route(index, cancelled: finished.isCancelled)
          for next in discovered[index] ?? [] { track(next) }
        }
      }
    }

    let job = Graph(nodes: nodes, fromMain: fromMain, discovered: discovered, board: board)
    try await job.run()

    var skipped = Array(repeating: false, count: count)
    for index in 0..<count {
      skipped[index] = dependencies[index].contains { fails[$0] && !skipped[$0] || skipped[$0] }
    }
    let result = board.snapshot
    #expect(result.violations.isEmpty, "\(result.violations.prefix(5))")
    #expect(job.misuses.isEmpty, "\(job.misuses.prefix(3))")
    #expect(result.completions.allSatisfy { $0 == 1 })
    #expect(result.started == skipped.map { !$0 })
    #expect(result.cancelled == skipped)
    #expect(skipped.contains(true) && skipped.contains(false))
    let expectedFailures = (0..<count).filter { fails[$0] && !skipped[$0] }
    #expect(job.failures.count == expectedFailures.count)
    // Every wait settled: the job remembers none of the thousands of tasks it routed.
    #expect(job.readJobState { $0.admission.dependencyRecordCount } == 0)
  }
}
