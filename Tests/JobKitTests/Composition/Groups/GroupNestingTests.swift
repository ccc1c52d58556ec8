import Foundation
import Testing

@testable import JobKit

@Suite("Nested groups")
struct GroupNestingTests {
  /// MGCommand's nesting example `seq[a, conc[b, c], d]`: a before b and c, d after both.
  @Test func sequenceWithAConcurrentGroupInside() async throws {
    let log = EventLog()
    let group = SequentialGroup([
      Step("a", log: log, finish: .later),
      ConcurrentGroup([Step("b", log: log, finish: .later), Step("c", log: log, finish: .later)]),
      Step("d", log: log),
    ])
    try await group.run()
    let events = log.all
    #expect(events.first == "a" && events.last == "d")
    #expect(Set(events[1...2]) == ["b", "c"])
  }

  /// MGSequentialCommandGroupSpec "with nested command group": an inner sequence is one step.
  @Test func aNestedSequenceIsOneStep() async throws {
    let log = EventLog()
    let inner = SequentialGroup([Step("subA", log: log), Step("subB", log: log, finish: .later)])
    let outer = SequentialGroup([inner, Step("c1", log: log, finish: .later), Step("c2", log: log)])
    try await outer.run()
    #expect(log.all == ["subA", "subB", "c1", "c2"])
  }

  /// CompositeOperations cascade 16: a transactional group inside a cascade.
  @Test func concurrentGroupInsideASequenceFinishesBeforeTheNextStep() async throws {
    let count = Locked(0)
    let seenByLast = Locked(-1)
    let group = SequentialGroup([
      BlockTask {},
      ConcurrentGroup([
        BlockTask(async: { count.mutate { $0 += 1 } }),
        BlockTask { count.mutate { $0 += 1 } },
      ]),
      BlockTask { seenByLast.mutate { $0 = count.value } },
    ])
    try await group.run()
    #expect(seenByLast.value == 2)
  }

  /// CompositeOperations cascade 19 ("rough integration"): 1 step, 100 concurrent groups adding 2
  /// items each, 20 concurrent groups each removing one and adding one, 1 step: 200 items.
  @Test func roughIntegration() async throws {
    let items = Locked<[Int]>([])
    var steps: [Operation] = [BlockTask {}]
    for index in 0..<100 {
      steps.append(
        ConcurrentGroup([
          BlockTask { items.mutate { $0.append(index) } },
          BlockTask(async: { items.mutate { $0.append(index) } }),
        ]))
    }
    for _ in 0..<20 {
      steps.append(
        ConcurrentGroup([
          BlockTask {
            items.mutate {
              $0.removeLast()
              $0.append(1)
            }
          }
        ]))
    }
    let countAtEnd = Locked(-1)
    steps.append(BlockTask { countAtEnd.mutate { $0 = items.value.count } })
    try await SequentialGroup(steps).run()
    #expect(countAtEnd.value == 200)
  }

  /// Groups nest to any depth in both directions. Invariant: every leaf runs once, each
  /// sequential level keeps its order, and the outermost group finishes after every leaf.
  @Test(arguments: GroupKind.allCases)
  func fiveLevelsDeep(outermost: GroupKind) async throws {
    let log = EventLog()
    var leaves: [Step] = []
    func level(_ depth: Int, kind: GroupKind) -> GroupJob {
      let first = Step("\(depth).first", log: log, finish: .later)
      let last = Step("\(depth).last", log: log)
      leaves += [first, last]
      var tasks: [Operation] = [first]
      if depth < 5 {
        tasks.append(level(depth + 1, kind: kind == .sequential ? .concurrent : .sequential))
      }
      tasks.append(last)
      return kind.make(tasks)
    }
    let root = level(1, kind: outermost)
    try await root.run()
    #expect(leaves.allSatisfy { $0.isFinished })
    let events = log.all
    #expect(events.count == 10 && Set(events).count == 10)
    var kind = outermost
    for depth in 1...5 {
      if kind == .sequential {
        let position = { (label: String) in events.firstIndex(of: label)! }
        #expect(position("\(depth).first") < position("\(depth).last"))
        if depth < 5 {
          // The nested group (all deeper leaves) runs between this level's two steps.
          let deeper = events.indices.filter { Int(events[$0].prefix(while: { $0 != "." }))! > depth }
          #expect(deeper.allSatisfy { position("\(depth).first") < $0 && $0 < position("\(depth).last") })
        }
      }
      kind = kind == .sequential ? .concurrent : .sequential
    }
  }

  @Test(arguments: GroupKind.allCases)
  func tasksRunOnTheQueueTheGroupWasGiven(kind: GroupKind) async throws {
    let queue = OperationQueue()
    queue.name = "given"
    let seen = Locked<[String]>([])
    let record = { @Sendable (name: String) in
      BlockTask { seen.mutate { $0.append("\(name) on \(OperationQueue.current?.name ?? "none")") } }
    }
    let group = kind.make([record("a"), record("b")], taskQueue: queue)
    #expect(group.taskQueue === queue)
    group.add(record("c"))
    try await group.run()
    #expect(Set(seen.value) == ["a on given", "b on given", "c on given"])
  }

  /// A group that is a dependency of another operation holds it until the whole tree is done.
  @Test func aGroupAsADependencyHoldsItsDependentUntilTheWholeTreeIsDone() async throws {
    let log = EventLog()
    let leaves = (0..<6).map { Step("\($0)", log: log, finish: .later) }
    let group = SequentialGroup([
      leaves[0],
      ConcurrentGroup([leaves[1], SequentialGroup([leaves[2], leaves[3]]), leaves[4]]),
      leaves[5],
    ])
    let sawUnfinished = Locked(true)
    let dependent = BlockOperation { sawUnfinished.mutate { $0 = !leaves.allSatisfy { $0.isFinished } } }
    dependent.addDependency(group)
    let queue = OperationQueue()
    queue.addOperation(dependent)
    group.startJob()
    #expect(await dependent.finishedSoon())
    #expect(!sawUnfinished.value)
    #expect(group.isFinished)
  }

  /// MGCommand README: cancelling a group cancels its active commands and removes the queued
  /// ones, in every nested group.
  @Test func cancellingTheOuterGroupReachesEveryNestedGroup() async throws {
    let log = EventLog()
    let running = (0..<2).map { ManualTask("running \($0)") }
    let innerConcurrent = ConcurrentGroup(running)
    let notStartedLeaf = Step("never", log: log)
    let innerSequence = SequentialGroup([notStartedLeaf])
    let outer = SequentialGroup([SequentialGroup([innerConcurrent]), innerSequence, Step("never either", log: log)])
    outer.startJob()
    for task in running {
      #expect(await task.startedLatch.opened())
    }
    outer.cancel()
    for task in running {
      #expect(await task.cancelledLatch.opened())
    }
    await #expect(throws: CancellationError.self) { try await outer.run() }
    #expect(innerConcurrent.isCancelled && innerSequence.isCancelled)
    #expect(innerConcurrent.isFinished && innerSequence.isFinished && notStartedLeaf.isFinished)
    #expect(notStartedLeaf.isCancelled && log.all.isEmpty)
  }

  /// CompositeOperations cascade 17: a task deep inside cancels the outer group; nothing after it
  /// runs.
  @Test func anInnerTaskCanCancelTheOuterGroup() async throws {
    let log = EventLog()
    let outer = SequentialGroup()
    let afterward = Step("after", log: log)
    outer.add(ConcurrentGroup([BlockTask { outer.cancel() }, Step("sibling", log: log)]))
    outer.add(afterward)
    await #expect(throws: CancellationError.self) { try await outer.run() }
    #expect(afterward.isCancelled && !log.all.contains("after"))
  }
}

/// Issue 23, item 8: groups nested deep (each the only task of the one above) finish level after
/// level without nesting the levels on the finishing thread's stack. Before the fix, about 4,000
/// levels crashed a debug build.
@Suite("Deep group nesting")
struct DeepGroupNestingTests {
  /// `kind` `nil`: the kinds alternate level by level, `deepNestingLevels` deep (100,000 in CI); one
  /// kind throughout, 20,000.
  @Test(arguments: [(nil, deepNestingLevels), (GroupKind.sequential, 20_000), (.concurrent, 20_000)])
  func nestedGroupsFinishWithoutGrowingTheStack(kind: GroupKind?, levels: Int) async throws {
    let queue = OperationQueue()
    queue.name = "DeepGroupNestingTests"
    let ran = Locked(0)
    let probe = StackProbe()
    var group: GroupJob = (kind ?? .sequential).make(
      [BlockTask { ran.mutate { $0 += 1 } }], taskQueue: queue)
    for level in 1..<levels {
      let kind = kind ?? (level.isMultiple(of: 2) ? .sequential : .concurrent)
      let inner = group
      let outer = kind.make([inner], taskQueue: queue)
      // Each level's completion runs in its parent's router, level after level.
      outer.setCompletion(forGroup: type(of: inner)) { probe.record() }
      group = outer
    }
    let root = group
    let done = Latch()
    root.startJob()
    Task {
      try? await root.waitForFinish()
      done.open()
    }
    #expect(await done.waitOpen(timeout: 120))
    try root.throwOutcome()
    #expect(ran.value == 1)
    #expect(probe.calls == levels - 1)
    #expect(probe.widestSpread < StackProbe.allowedSpread)
  }
}

extension DeepGroupNestingTests {
  /// Cancelling the outermost of `deepNestingLevels` nested groups (100,000 in CI) (kinds alternating) cancels every level
  /// down to the innermost task, and every level finishes cancelled. Before the fix the cancel
  /// recursed once per level and crashed.
  @Test func cancellingAHundredThousandNestedGroups() async throws {
    let levels = deepNestingLevels
    let queue = OperationQueue()
    queue.name = "DeepGroupNestingTests.cancel"
    let innermost = ManualTask("innermost")
    var group: GroupJob = SequentialGroup([innermost], taskQueue: queue)
    for level in 1..<levels {
      let kind = level.isMultiple(of: 2) ? GroupKind.sequential : .concurrent
      group = kind.make([group], taskQueue: queue)
    }
    let root = group
    root.startJob()
    #expect(await innermost.startedLatch.waitOpen(timeout: 120))
    // On a thread of its own: the whole tree is cancelled, then finishes, on this thread.
    Thread { root.cancel() }.start()
    #expect(await innermost.cancelledLatch.waitOpen(timeout: 120))
    let done = Latch()
    Task {
      try? await root.waitForFinish()
      done.open()
    }
    #expect(await done.waitOpen(timeout: 120))
    #expect(root.isCancelled)
    #expect(throws: CancellationError.self) { try root.throwOutcome() }
  }
}

extension DeepGroupNestingTests {
  /// `deepNestingLevels` nested groups (kinds alternating) that never started, the outermost
  /// cancelled before its start: each level drops the group below it, which finishes cancelled
  /// before the level above does; the innermost task never runs. Before the fix each level
  /// started the next one's cancelled start inline, and the stack overflowed. `onQueue`: the
  /// root is added to a queue after the cancel, else started with `startJob()`.
  @Test(arguments: [false, true])
  func groupsCancelledBeforeTheyStartedFinishWithoutGrowingTheStack(onQueue: Bool) async throws {
    let levels = deepNestingLevels
    let outcome = Locked<CancelledTreeOutcome?>(nil)
    let done = Latch()
    // On a thread of its own, off the pool other tests need: the tree is built, cancelled and
    // started, finishes cancelled below the root on this thread, is checked and released.
    Thread {
      outcome.mutate { $0 = Self.cancelBeforeStart(levels: levels, onQueue: onQueue) }
      done.open()
    }.start()
    #expect(await done.waitOpen(timeout: 120))
    let result = try #require(outcome.value)
    #expect(result.rootFinishedCancelled)
    #expect(result.ran == 0)
    #expect(result.everyLevelFinishedCancelled)
    #expect(result.early == 0)
  }

  struct CancelledTreeOutcome {
    var rootFinishedCancelled = false
    var ran = -1
    var everyLevelFinishedCancelled = false
    var early = -1
  }

  /// Builds `levels` nested groups (kinds alternating) around a `BlockTask`, cancels the root,
  /// starts it (or adds it to a queue), waits for it on this thread and reports.
  static func cancelBeforeStart(levels: Int, onQueue: Bool) -> CancelledTreeOutcome {
    let queue = OperationQueue()
    queue.name = "DeepGroupNestingTests.cancelBeforeStart"
    let ran = Locked(0)
    let innermost = BlockTask { ran.mutate { $0 += 1 } }
    var groups: [Operation] = [SequentialGroup([innermost], taskQueue: queue)]
    groups.reserveCapacity(levels + 1)
    for level in 1..<levels {
      let kind = level.isMultiple(of: 2) ? GroupKind.sequential : .concurrent
      groups.append(kind.make([groups[level - 1]], taskQueue: queue))
    }
    let root = groups[levels - 1] as! GroupJob
    // A group finishing while the task it dropped (the level below) has not breaks the promise.
    let early = Locked(0)
    var observers: [DroppedTaskObserver] = []
    var everyObserverAdded = true
    for (group, dropped) in zip(groups.dropFirst(), groups) {
      let observer = DroppedTaskObserver(dropped: dropped, early: early)
      everyObserverAdded = everyObserverAdded && (group as! GroupJob).addFinishObserver(observer)
      observers.append(observer)
    }
    groups.insert(innermost, at: 0)
    root.cancel()
    if onQueue { queue.addOperation(root) } else { root.startJob() }
    root.waitUntilFinished()
    var outcome = CancelledTreeOutcome()
    outcome.rootFinishedCancelled = root.isCancelled && root.error == nil
    outcome.ran = ran.value
    outcome.everyLevelFinishedCancelled = groups.allSatisfy { $0.isFinished && $0.isCancelled }
    outcome.early = everyObserverAdded ? early.value : -1
    return outcome
  }

  /// Counts in `early` a group that finished before `dropped`, the task it dropped.
  final class DroppedTaskObserver: OperationFinishObserver, @unchecked Sendable {
    // @unchecked Sendable: both stored properties are immutable references to Sendable values.
    let dropped: Operation
    let early: Locked<Int>
    init(dropped: Operation, early: Locked<Int>) {
      self.dropped = dropped
      self.early = early
    }
    func operationDidFinish(_ operation: ConcurrentOperation) {
      if !dropped.isFinished { early.mutate { $0 += 1 } }
    }
  }
}
