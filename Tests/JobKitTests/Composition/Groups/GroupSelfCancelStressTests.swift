import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A leaf of a stress tree: records its start, then finishes (inline or from a global queue),
/// cancels itself first (`cancel()` then `operationDone()`), or waits until it is cancelled.
private final class StressLeaf: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `started` is a `Locked`.
  enum Role {
    case finishes(later: Bool)
    case cancelsItself(later: Bool)
    case waitsForCancel
  }

  let id: Int
  let role: Role
  let started: Locked<Set<Int>>

  init(id: Int, role: Role, started: Locked<Set<Int>>) {
    self.id = id
    self.role = role
    self.started = started
    super.init()
  }

  override func operationStart() {
    started.mutate { _ = $0.insert(id) }
    switch role {
    case .finishes(let later):
      if later { DispatchQueue.global().async { self.operationDone() } } else { operationDone() }
    case .cancelsItself(let later):
      let end: @Sendable () -> Void = {
        self.cancel()
        self.operationDone()
      }
      if later { DispatchQueue.global().async(execute: end) } else { end() }
    case .waitsForCancel:
      break
    }
  }

  override func operationCancelled() {
    if case .waitsForCancel = role { operationDone() }
  }
}

/// One random tree: groups nested up to three levels, one leaf that cancels itself, and what
/// the contract predicts.
private struct StressTree {
  let root: GroupJob
  /// Every group, with its handler's call count.
  let groups: [(group: GroupJob, calls: Locked<Int>)]
  /// The groups from the cancelling leaf's parent up to the root (indexes into `groups`).
  let path: Set<Int>
  /// Leaves in steps of a sequential group on the path after the step holding the canceller.
  let forbidden: Set<Int>
  let started: Locked<Set<Int>>

  init(seed: UInt64) {
    var random = SeededGenerator(seed: seed)
    let started = Locked<Set<Int>>([])
    var builder = Builder(started: started)
    let shape = builder.shape(depth: 0, random: &random)
    let leaves = shape.leafPaths()
    let canceller = leaves[Int.random(in: 0..<leaves.count, using: &random)]
    var path: Set<Int> = []
    root = builder.make(shape, canceller: canceller, path: &path, random: &random) as! GroupJob
    groups = builder.groups
    self.path = path
    forbidden = shape.forbiddenLeaves(after: canceller)
    self.started = started
  }
}

/// The shape of a tree before its operations are made: a leaf id, or a group.
private indirect enum Shape {
  case leaf(Int)
  case group(sequential: Bool, children: [Shape])

  /// The path (child indexes) to every leaf.
  func leafPaths(prefix: [Int] = []) -> [[Int]] {
    switch self {
    case .leaf: return [prefix]
    case .group(_, let children):
      return children.enumerated().flatMap { index, child in child.leafPaths(prefix: prefix + [index]) }
    }
  }

  var leafIDs: [Int] {
    switch self {
    case .leaf(let id): return [id]
    case .group(_, let children): return children.flatMap(\.leafIDs)
    }
  }

  /// Leaves of the steps after the path's step in each sequential group along `path`.
  func forbiddenLeaves(after path: [Int]) -> Set<Int> {
    guard case .group(let sequential, let children) = self, let first = path.first else { return [] }
    var result = children[first].forbiddenLeaves(after: Array(path.dropFirst()))
    if sequential {
      for later in children[(first + 1)...] { result.formUnion(later.leafIDs) }
    }
    return result
  }
}

private struct Builder {
  let started: Locked<Set<Int>>
  var nextLeaf = 0
  var groups: [(group: GroupJob, calls: Locked<Int>)] = []

  init(started: Locked<Set<Int>>) {
    self.started = started
  }

  mutating func shape(depth: Int, random: inout SeededGenerator) -> Shape {
    let count = Int.random(in: 1...3, using: &random)
    let children = (0..<count).map { _ -> Shape in
      if depth < 2, Double.random(in: 0..<1, using: &random) < 0.4 {
        return shape(depth: depth + 1, random: &random)
      }
      nextLeaf += 1
      return .leaf(nextLeaf)
    }
    return .group(sequential: Bool.random(using: &random), children: children)
  }

  /// Makes the operations of `shape`; `canceller` is the path to the cancelling leaf below it,
  /// `nil` if it is not below. Adds the groups on the path to `path`.
  mutating func make(
    _ shape: Shape, canceller: [Int]?, path: inout Set<Int>, random: inout SeededGenerator
  ) -> Operation {
    let onPath = canceller != nil
    switch shape {
    case .leaf(let id):
      let later = Bool.random(using: &random)
      let role: StressLeaf.Role = canceller == [] ? .cancelsItself(later: later) : .finishes(later: later)
      return StressLeaf(id: id, role: role, started: started)
    case .group(let sequential, let children):
      var operations: [Operation] = []
      for (index, child) in children.enumerated() {
        let below = canceller?.first == index ? Array(canceller!.dropFirst()) : nil
        operations.append(make(child, canceller: below, path: &path, random: &random))
      }
      if onPath && !sequential {
        // Stops only when cancelled: only the propagation ends this group.
        nextLeaf += 1
        operations.append(StressLeaf(id: nextLeaf, role: .waitsForCancel, started: started))
      }
      let group: GroupJob = sequential ? SequentialGroup(operations) : ConcurrentGroup(operations)
      let calls = Locked(0)
      group.onCancelled = { calls.mutate { $0 += 1 } }
      if onPath { path.insert(groups.count) }
      groups.append((group, calls))
      return group
    }
  }
}

/// Issue 20, item 1, under load: thousands of groups in random trees, one random leaf per tree
/// cancels itself (inline or later). Invariants: every group on the path from that leaf to the
/// root is cancelled (no error) and calls its handler exactly once; every other group calls it
/// at most once, and only if it ended cancelled; no step after the cancelled one starts in a
/// sequential group on the path; every tree finishes.
@Suite("Groups: a task that cancels itself, stress", .timeLimit(.minutes(3)))
struct GroupSelfCancelStressTests {
  @Test func randomTreesWithASelfCancellingLeaf() async throws {
    let environment = ProcessInfo.processInfo.environment
    let firstSeed = environment["JOBKIT_SEED"].flatMap(UInt64.init) ?? 20
    let count = environment["JOBKIT_SELF_CANCEL_TREES"].flatMap(UInt64.init) ?? 2_000
    var groupCount = 0
    for batch in stride(from: firstSeed, to: firstSeed + count, by: 100) {
      let trees = (batch..<min(batch + 100, firstSeed + count)).map { (seed: $0, tree: StressTree(seed: $0)) }
      for (_, tree) in trees { tree.root.startJob() }
      for (seed, tree) in trees {
        groupCount += tree.groups.count
        let finished = await tree.root.finishedSoon()
        #expect(finished, "seed \(seed): the tree did not finish")
        guard finished else {
          tree.root.cancel()
          continue
        }
        for (index, entry) in tree.groups.enumerated() {
          let (group, calls) = entry
          if tree.path.contains(index) {
            #expect(group.isCancelled && group.error == nil, "seed \(seed): group \(index) on the path not cancelled")
            #expect(
              calls.value == 1, "seed \(seed): group \(index) on the path called its handler \(calls.value) times")
          } else {
            #expect(calls.value <= 1, "seed \(seed): group \(index) called its handler \(calls.value) times")
            if calls.value == 1 { #expect(group.isCancelled, "seed \(seed): group \(index) not cancelled") }
          }
        }
        let wrong = tree.started.value.intersection(tree.forbidden)
        #expect(wrong.isEmpty, "seed \(seed): leaves \(wrong.sorted()) started after the cancelled step")
      }
    }
    #expect(groupCount >= 2 * Int(count))  // about 2.4 groups per tree
  }
}
