import Foundation
import Testing

@testable import JobKit

@Suite("ConcurrentGroup")
struct ConcurrentGroupTests {
  /// MGCommandGroupSpec "with two asynchronous commands": all start at once, and the group
  /// finishes only when all finished.
  @Test func startsAllTasksAtOnceAndFinishesWhenAllFinished() async throws {
    let tasks = (0..<3).map { ManualTask("\($0)") }
    let group = ConcurrentGroup(tasks)
    group.startJob()
    for task in tasks {
      #expect(await task.startedLatch.opened())  // every task started while none has finished
    }
    tasks[0].finish()
    tasks[2].finish()
    #expect(!group.isFinished)
    tasks[1].finish()
    try await group.run()
    #expect(tasks.allSatisfy { $0.isFinished })
  }

  /// MGCommand's auto-start bug, fixed: a task added to a running concurrent group starts at
  /// once, while the others still run.
  @Test func aTaskAddedWhileRunningStartsAtOnce() async throws {
    let first = ManualTask("first")
    let group = ConcurrentGroup([first])
    group.startJob()
    #expect(await first.startedLatch.opened())
    let added = ManualTask("added")
    group.add(added)
    #expect(await added.startedLatch.opened())
    #expect(!first.isFinished)
    added.finish()
    first.finish()
    try await group.run()
  }

  /// A failure does not stop the others; the group reports every failure.
  @Test func reportsEveryFailureAfterAllTasksFinished() async throws {
    let log = EventLog()
    let group = ConcurrentGroup([
      Step("fails 1", log: log, finish: .later, failure: TestError(1)),
      Step("ok", log: log, finish: .later),
      Step("fails 2", log: log, finish: .later, failure: TestError(2)),
    ])
    await #expect(throws: JobFailures.self) { try await group.run() }
    #expect(Set(log.all) == ["fails 1", "ok", "fails 2"])
    let failures = try #require(group.error as? JobFailures).failures
    #expect(Set(failures.compactMap { ($0.error as? TestError)?.id }) == [1, 2])
    #expect(group.failures.count == 2)
  }

  /// CompositeOperations transactional 1: cancelling the group cancels every task; a cancellable
  /// one stops, one that cannot be cancelled is waited for, and one not started yet never runs.
  @Test func cancelCancelsEveryTaskAndWaitsForThem() async throws {
    let log = EventLog()
    let cancellable = ManualTask("cancellable", finishesOnCancel: true)
    let stubborn = ManualTask("stubborn", finishesOnCancel: false)
    let blocker = ManualTask("blocker")  // never started: keeps `waiting` from becoming ready
    let waiting = Step("waiting", log: log)
    waiting.addDependency(blocker)
    let group = ConcurrentGroup([cancellable, stubborn, waiting])
    group.startJob()
    #expect(await cancellable.startedLatch.opened())
    #expect(await stubborn.startedLatch.opened())
    group.cancel()
    // `waiting` may not be tracked yet (the group's `main()` tracks its tasks in order, and the
    // first two can start before it gets to the third): a task tracked by a stopping group is
    // cancelled then, so it is checked once the group finished.
    #expect(cancellable.isCancelled && stubborn.isCancelled)
    #expect(await cancellable.finishedSoon())
    #expect(!group.isFinished)
    stubborn.finish()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(waiting.isCancelled && waiting.isFinished && log.all.isEmpty)
  }

  /// MGCommandGroupSpec "should cancel execution": execute, then cancel at once: the group
  /// completes exactly once.
  @Test func cancelRightAfterStartFinishesOnce() async throws {
    let finishCount = Locked(0)
    let group = ConcurrentGroup([ManualTask("cancellable"), BlockTask {}])
    group.completionBlock = { finishCount.mutate { $0 += 1 } }
    group.startJob()
    group.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    // Foundation runs the completionBlock on a global queue after the finish.
    #expect(await eventually { finishCount.value == 1 })
    group.completionBlock = nil
  }
}

@Suite("Groups, either kind")
struct GroupKindTests {
  /// MGCommandGroupSpec and MGSequentialCommandGroupSpec "should finish instantly".
  @Test(arguments: GroupKind.allCases)
  func anEmptyGroupFinishesAtOnce(kind: GroupKind) async throws {
    let group = kind.make()
    try await group.run()
    #expect(group.isFinished && group.error == nil)
  }

  /// MGCommandGroupSpec "should execute commands" with two synchronous commands.
  @Test(arguments: GroupKind.allCases)
  func runsEveryTask(kind: GroupKind) async throws {
    let log = EventLog()
    let group = kind.make([BlockTask { log.record("a") }, BlockTask { log.record("b") }])
    try await group.run()
    #expect(Set(log.all) == ["a", "b"] && log.all.count == 2)
  }

  @Test(arguments: GroupKind.allCases)
  func aTaskAddedAfterTheGroupFinishedIsReportedAndNotStarted(kind: GroupKind) async throws {
    let group = kind.make([InstantTask()])
    QuietMisuse.silence(group)
    try await group.run()
    let late = ManualTask("late")
    group.add(late)
    #expect(group.misuses == [JobKitError(.trackedAfterJobFinished)])
    #expect(!late.didStart && !late.isExecuting && !late.isFinished)
  }

  /// MGCommandGroupSpec "should fail to add same command instance twice": reported, ignored.
  @Test(arguments: GroupKind.allCases)
  func aTaskAddedTwiceRunsOnceAndIsReported(kind: GroupKind) async throws {
    let log = EventLog()
    let step = Step("once", log: log)
    let group = kind.make([step])
    QuietMisuse.silence(group)
    group.add(step)
    try await group.run()
    #expect(log.all == ["once"])
    #expect(group.misuses == [JobKitError(.taskAlreadyTracked)])
  }

  /// "should fail to call execute twice": starting a group twice is reported and ignored.
  @Test(arguments: GroupKind.allCases)
  func startingAGroupTwiceIsReported(kind: GroupKind) async throws {
    let gate = ManualTask()
    let group = kind.make([gate])
    QuietMisuse.silence(group)
    group.startJob()
    group.startJob()
    #expect(await gate.startedLatch.opened())
    gate.finish()
    try await group.run()
    #expect(group.misuses == [JobKitError(.startedTwice)])
  }

  /// A plain `Operation` works as a task too.
  @Test(arguments: GroupKind.allCases)
  func plainOperationsAreTasksToo(kind: GroupKind) async throws {
    let log = EventLog()
    let group = kind.make([BlockOperation { log.record("plain") }, Step("step", log: log, finish: .later)])
    try await group.run()
    #expect(Set(log.all) == ["plain", "step"])
  }
}
