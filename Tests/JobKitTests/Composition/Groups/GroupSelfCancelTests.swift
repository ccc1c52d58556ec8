import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Counts the calls of a group's cancellation handler and whether the group was still unfinished
/// during each.
final class CancellationCounter: @unchecked Sendable {
  // @unchecked Sendable: `calls` is a `Locked`; the latch is thread-safe.
  let calls = Locked(0)
  let unfinishedDuringCall = Locked(true)
  let called = Latch()

  /// Sets `group.onCancelled` to count its calls.
  func watch(_ group: GroupJob) {
    group.onCancelled = { [weak group] in
      self.calls.mutate { $0 += 1 }
      if group?.isFinished == true { self.unfinishedDuringCall.mutate { $0 = false } }
      self.called.open()
    }
  }

  var count: Int { calls.value }

  /// Watches `group`, starts it, cancels `first` once it started (for the group, a task that
  /// cancelled itself) and waits for the group to finish.
  static func startCancellingFirst(_ group: GroupJob, first: TestTask) async -> CancellationCounter {
    let counter = CancellationCounter()
    counter.watch(group)
    group.startJob()
    #expect(await first.startedLatch.opened())
    first.cancel()
    #expect(await group.finishedSoon())
    return counter
  }
}

/// Issue 20, item 1: a task that cancels itself cancels its composite (CompositeOperations). Each
/// test names the seed test it is modelled on.
@Suite("Groups: a task that cancels itself cancels its group", .timeLimit(.minutes(1)))
struct GroupSelfCancelTests {
  /// CompositeOperations `COCascadeOperationTests.testCascadeOperation_cancel_inner_operation` and
  /// `test_compositeOperation_cancel_does_not_run_suboperations_completionBlocks_if_cancellation_handler_is_provided`:
  /// the first step cancels itself; the second never runs, the cascade's cancellation handler
  /// runs (once) instead of its completion.
  @Test func aStepThatCancelsItselfCancelsTheCascade() async throws {
    let first = TestTask("first")
    let ran = Locked(false)
    let second = BlockTask { ran.mutate { $0 = true } }
    let cascade = SequentialGroup([first, second])
    let counter = CancellationCounter()
    counter.watch(cascade)
    let running = Task { try await cascade.run() }
    #expect(await first.startedLatch.opened())
    first.cancel()  // from outside the group: for the group, the step cancelled itself
    let finished = await cascade.finishedSoon()
    #expect(finished)
    if !finished { cascade.cancel() }
    await #expect(throws: CancellationError.self) { try await running.value }
    #expect(cascade.isCancelled)
    #expect(cascade.error == nil)
    #expect(cascade.failures.isEmpty)
    #expect(!ran.value)
    #expect(second.isCancelled && second.isFinished)
    #expect(counter.count == 1)
    #expect(counter.unfinishedDuringCall.value)
  }

  /// CompositeOperations `COTransactionalOperationTests.testTransactionalOperation_cancel`: one
  /// sub-operation of a transaction cancels itself; every other one (here: tasks that stop only
  /// when cancelled) is cancelled, and the cancellation handler runs instead of the completion.
  @Test func aMemberThatCancelsItselfCancelsTheTransaction() async throws {
    let members = (0..<3).map { TestTask("member \($0)", finishesOnCancel: true) }
    let transaction = ConcurrentGroup(members)
    let counter = CancellationCounter()
    counter.watch(transaction)
    transaction.startJob()
    for member in members {
      #expect(await member.startedLatch.opened())
    }
    members[1].cancel()
    let finished = await transaction.finishedSoon()
    #expect(finished)
    if !finished { transaction.cancel() }
    #expect(members.allSatisfy { $0.isCancelled && $0.isFinished })
    #expect(transaction.isCancelled && transaction.error == nil)
    #expect(counter.count == 1)
  }

  /// CompositeOperations `COCascadeOperationTests.test_transactionalOperation_inside_compositeOperation_cancellationHandlers`:
  /// a sub-operation of a transaction that is a step of a cascade cancels itself: the
  /// transaction and the cascade are cancelled, the cascade's later step never runs.
  @Test(arguments: GroupKind.allCases)
  func aCancelledGroupInsideACascadeCancelsTheCascade(inner kind: GroupKind) async throws {
    let cancelling = TestTask("cancelling")
    let sibling = TestTask("sibling", finishesOnCancel: true)
    let inner = kind.make([cancelling, sibling])
    let ran = Locked(false)
    let later = BlockTask { ran.mutate { $0 = true } }
    let cascade = SequentialGroup([inner, later])
    let innerCounter = CancellationCounter()
    innerCounter.watch(inner)
    let cascadeCounter = CancellationCounter()
    cascadeCounter.watch(cascade)
    cascade.startJob()
    #expect(await cancelling.startedLatch.opened())
    cancelling.cancel()
    let finished = await cascade.finishedSoon()
    #expect(finished)
    if !finished { cascade.cancel() }
    #expect(inner.isCancelled && inner.error == nil)
    #expect(cascade.isCancelled && cascade.error == nil)
    #expect(sibling.isCancelled && sibling.isFinished)
    #expect(!ran.value && later.isCancelled)
    #expect(innerCounter.count == 1)
    #expect(cascadeCounter.count == 1)
  }

  /// A task that cancelled itself while the group is made with `init(taking:)`: the sequence's
  /// later tasks are never made.
  @Test(arguments: GroupKind.allCases)
  func aTakingGroupStopsTaking(kind: GroupKind) async throws {
    let first = TestTask("first")
    let made = Locked(0)
    let tasks = (0..<100).lazy.map { index -> Operation in
      made.mutate { $0 += 1 }
      return index == 0 ? first : BlockTask {}
    }
    let group: GroupJob =
      kind == .sequential ? SequentialGroup(taking: tasks) : ConcurrentGroup(taking: tasks, maxRunning: 1)
    let counter = await CancellationCounter.startCancellingFirst(group, first: first)
    #expect(group.isCancelled && group.error == nil)
    #expect(made.value == 1)
    #expect(counter.count == 1)
  }

  /// The group's own cancel calls the handler once, and the tasks it cancelled do not count as
  /// cancelling themselves (a second call would show it).
  @Test(arguments: GroupKind.allCases)
  func cancellingTheGroupCallsTheHandlerOnce(kind: GroupKind) async throws {
    let members = (0..<3).map { TestTask("member \($0)", finishesOnCancel: true) }
    let group = kind.make(members)
    let counter = CancellationCounter()
    counter.watch(group)
    group.startJob()
    #expect(await members[0].startedLatch.opened())
    group.cancel()
    #expect(await group.finishedSoon())
    #expect(group.isCancelled && group.error == nil)
    #expect(counter.count == 1)
    #expect(counter.unfinishedDuringCall.value)
  }

  /// Cancelled before its queue started it: no task runs, the handler is called once.
  @Test(arguments: GroupKind.allCases)
  func aGroupCancelledBeforeItsStartCallsTheHandler(kind: GroupKind) async throws {
    let ran = Locked(false)
    let group = kind.make([BlockTask { ran.mutate { $0 = true } }])
    let counter = CancellationCounter()
    counter.watch(group)
    group.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(!ran.value && counter.count == 1 && counter.unfinishedDuringCall.value)
  }

  /// A group that ends otherwise (success, a failure, a stop on failure that cancels the next
  /// task) never calls the handler, and releases it.
  enum OtherEnd: String, CaseIterable, Sendable {
    case success, failure, stopOnFailure, cancelledAndFailed
  }

  @Test(arguments: OtherEnd.allCases)
  func otherEndsDoNotCallTheHandler(end: OtherEnd) async throws {
    let first = TestTask("first", finishesOnCancel: false)
    let second = TestTask("second", finishesOnCancel: true)
    let group = SequentialGroup([first, second])
    group.stopsOnFailure = end == .stopOnFailure
    let calls = Locked(0)
    var probe: ReleaseProbe? = ReleaseProbe { [weak group] in _ = group?.onCancelled }
    let released = probe!.released
    group.onCancelled = { [probe] in
      _ = probe
      calls.mutate { $0 += 1 }
    }
    probe = nil
    group.startJob()
    #expect(await first.startedLatch.opened())
    switch end {
    case .success:
      first.finish()
    case .failure, .stopOnFailure:
      first.finish(error: TestError(1))
    case .cancelledAndFailed:
      first.cancel()  // keeps running: the error it finishes with makes it a failure
      first.finish(error: TestError(2))
    }
    if end != .stopOnFailure {
      #expect(await second.startedLatch.opened())
      second.finish()
    }
    #expect(await group.finishedSoon())
    #expect(calls.value == 0)
    #expect(!group.isCancelled)
    #expect((group.error == nil) == (end == .success))
    #expect(await released.waitOpen(timeout: 30))
  }

  /// With `propagatesTaskCancellation` off, a task that cancelled itself is an ordinary finish.
  @Test(arguments: GroupKind.allCases)
  func propagationCanBeTurnedOff(kind: GroupKind) async throws {
    let first = TestTask("first")
    let ran = Locked(false)
    let second = BlockTask { ran.mutate { $0 = true } }
    let group = kind.make([first, second])
    #expect(group.propagatesTaskCancellation)
    group.propagatesTaskCancellation = false
    let counter = await CancellationCounter.startCancellingFirst(group, first: first)
    #expect(ran.value)
    #expect(!group.isCancelled && group.error == nil)
    #expect(counter.count == 0)
  }

  /// A plain `JobController` keeps routing a cancelled task: its callbacks decide.
  @Test func aJobControllerKeepsRouting() async throws {
    final class Job: JobController, @unchecked Sendable {
      // @unchecked Sendable: `routed` is a `Locked`; `first` is immutable.
      let first = TestTask("first")
      let routed = Locked<[String]>([])
      override func main() {
        trackAndQueue(first) { [self] task in
          routed.mutate { $0.append("first cancelled: \(task.isCancelled)") }
          trackAndQueue(BlockTask { self.routed.mutate { $0.append("next") } })
        }
      }
    }
    let job = Job()
    job.startJob()
    #expect(await job.first.startedLatch.opened())
    job.first.cancel()
    #expect(await job.finishedSoon())
    #expect(job.routed.value == ["first cancelled: true", "next"])
    #expect(!job.isCancelled)
  }

  /// The groups a `CommandQueue` runs its commands in do not propagate: a command that cancels
  /// itself leaves the others alone.
  @Test func aCommandQueueCommandThatCancelsItselfLeavesTheOthers() async throws {
    let queue = CommandQueue(mode: .sequential)
    let first = TestTask("first")
    let ran = Latch()
    queue.add(first)
    queue.add(BlockTask { ran.open() })
    #expect(await first.startedLatch.opened())
    first.cancel()
    #expect(await ran.opened())
    await queue.drained()
  }

  /// The handler is released after the group's lock: a probe captured in it calls back into the
  /// group from its `deinit`, on the thread that drops it.
  @Test(arguments: [false, true])
  func theHandlerIsReleasedOutsideTheLock(replaced: Bool) async throws {
    let task = TestTask("task")
    let group = ConcurrentGroup([task])
    var probe: ReleaseProbe? = ReleaseProbe { [weak group] in _ = group?.onCancelled }
    let released = probe!.released
    let called = Latch()
    group.onCancelled = { [probe] in
      _ = probe
      called.open()
    }
    probe = nil
    if replaced {
      group.onCancelled = {}
      #expect(await released.waitOpen(timeout: 30))
    }
    group.startJob()
    #expect(await task.startedLatch.opened())
    task.cancel()
    #expect(await group.finishedSoon())
    #expect(called.opened == !replaced)
    #expect(await released.waitOpen(timeout: 30))
  }

  /// A handler set after the group finished is never called, and not kept.
  @Test func aHandlerSetAfterTheFinishIsDropped() async throws {
    let group = SequentialGroup([BlockTask {}])
    try await group.run()
    var probe: ReleaseProbe? = ReleaseProbe { [weak group] in _ = group?.onCancelled }
    let released = probe!.released
    group.onCancelled = { [probe] in _ = probe }
    probe = nil
    #expect(await released.waitOpen(timeout: 30))
    #expect(group.onCancelled == nil)
  }
}
