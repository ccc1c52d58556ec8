import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A `BlockTask` or `Work` whose body says "cancelled" by throwing `CancellationError` (or, for
/// a callback body, completing with it) without anyone having called `cancel()`.
enum SelfCancellingBody: String, CaseIterable, Sendable {
  case blockTaskSync
  /// Swift's own idiom: the body cancels its Swift task, then `try Task.checkCancellation()`.
  case blockTaskAsync
  case workSync
  case workAsync
  case workCallback

  /// The task; its body waits for `gate` (if any) before it throws, blocking no thread.
  func make(after gate: [Latch] = []) -> ConcurrentOperation {
    switch self {
    case .blockTaskSync:
      return BlockTask { throw CancellationError() }
    case .blockTaskAsync:
      return BlockTask(async: {
        for latch in gate { _ = await latch.waitOpen() }
        withUnsafeCurrentTask { $0?.cancel() }
        try Task.checkCancellation()
      })
    case .workSync:
      return Work<Int> { throw CancellationError() }
    case .workAsync:
      return Work<Int>(async: {
        for latch in gate { _ = await latch.waitOpen() }
        throw CancellationError()
      })
    case .workCallback:
      return Work<Int>(callback: { complete in
        Task {
          for latch in gate { _ = await latch.waitOpen() }
          complete(.failure(CancellationError()))
        }
      })
    }
  }

  /// Whether the body can wait for other tasks without blocking a thread.
  var canWait: Bool { self != .blockTaskSync && self != .workSync }
}

/// Issue 20, item 1, for the tasks JobKit makes from closures: a `BlockTask` or `Work` whose body
/// throws `CancellationError` cancels itself, so it cancels its composite exactly as a task that
/// called `cancel()` on itself (`GroupSelfCancelTests`). Each test names the seed test it is
/// modelled on.
@Suite("Tasks: a body that throws CancellationError cancels its task", .timeLimit(.minutes(1)))
struct TaskSelfCancelTests {
  /// The task itself: cancelled, no error, not a failure; `Work.result` stays informative.
  @Test(arguments: SelfCancellingBody.allCases)
  func theTaskEndsCancelledWithoutAnError(body: SelfCancellingBody) async throws {
    let task = body.make()
    OperationQueue().addOperation(task)
    #expect(await task.finishedSoon())
    #expect(task.isCancelled)
    #expect(task.error == nil)
    await #expect(throws: CancellationError.self) { try await task.waitForFinish() }
    if let work = task as? Work<Int> {
      guard case .failure(let error) = work.result else {
        Issue.record("expected a failure, got \(String(describing: work.result))")
        return
      }
      #expect(error is CancellationError)
      #expect(work.output == nil)
      await #expect(throws: CancellationError.self) { _ = try await work.run() }
    }
  }

  /// CompositeOperations `COCascadeOperationTests.testCascadeOperation_cancel_inner_operation` and
  /// `test_compositeOperation_cancel_does_not_run_suboperations_completionBlocks_if_cancellation_handler_is_provided`
  /// (the first sub-operation calls `[operation cancel]`): here the first step's body throws
  /// `CancellationError`. The later step never runs, the cascade's cancellation handler runs
  /// once instead of its completion, and `run()` throws `CancellationError`.
  @Test(arguments: SelfCancellingBody.allCases)
  func aStepThatThrowsCancellationErrorCancelsTheCascade(body: SelfCancellingBody) async throws {
    let first = body.make()
    let ran = Locked(false)
    let later = BlockTask { ran.mutate { $0 = true } }
    let cascade = SequentialGroup([first, later])
    let counter = CancellationCounter()
    counter.watch(cascade)
    let running = Task { try await cascade.run() }
    let finished = await cascade.finishedSoon()
    #expect(finished)
    if !finished { cascade.cancel() }
    await #expect(throws: CancellationError.self) { try await running.value }
    #expect(first.isCancelled && first.error == nil)
    #expect(cascade.isCancelled)
    #expect(cascade.error == nil)
    #expect(cascade.failures.isEmpty)
    #expect(!ran.value)
    #expect(later.isCancelled && later.isFinished)
    #expect(counter.count == 1)
    #expect(counter.unfinishedDuringCall.value)
  }

  /// CompositeOperations `COTransactionalOperationTests.testTransactionalOperation_cancel`: one
  /// sub-operation of a transaction cancels itself, here by throwing `CancellationError` once
  /// its siblings (tasks that stop only when cancelled) run; every sibling is cancelled and the
  /// cancellation handler runs once instead of the completion.
  @Test(arguments: SelfCancellingBody.allCases)
  func aMemberThatThrowsCancellationErrorCancelsTheTransaction(body: SelfCancellingBody) async throws {
    let siblings = (0..<2).map { TestTask("sibling \($0)", finishesOnCancel: true) }
    // A synchronous body cannot wait without blocking a queue thread: it throws at once, and a
    // sibling it beats to the start is cancelled before it starts.
    let member = body.make(after: body.canWait ? siblings.map(\.startedLatch) : [])
    let transaction = ConcurrentGroup(siblings + [member])
    let counter = CancellationCounter()
    counter.watch(transaction)
    let running = Task { try await transaction.run() }
    let finished = await transaction.finishedSoon()
    #expect(finished)
    if !finished { transaction.cancel() }
    await #expect(throws: CancellationError.self) { try await running.value }
    #expect(member.isCancelled && member.error == nil)
    #expect(siblings.allSatisfy { $0.isCancelled && $0.isFinished })
    if body.canWait {
      #expect(siblings.allSatisfy { $0.startedLatch.opened })
    }
    #expect(transaction.isCancelled && transaction.error == nil)
    #expect(transaction.failures.isEmpty)
    #expect(counter.count == 1)
  }

  /// CompositeOperations `COCascadeOperationTests.test_transactionalOperation_inside_compositeOperation_cancellationHandlers`:
  /// the cancel of a task inside a transaction that is a step of a cascade travels up: the
  /// transaction and the cascade are cancelled, the cascade's later step never runs.
  @Test(arguments: [SelfCancellingBody.blockTaskAsync, .workAsync])
  func theCancelTravelsUpNestedGroups(body: SelfCancellingBody) async throws {
    let sibling = TestTask("sibling", finishesOnCancel: true)
    let inner = ConcurrentGroup([sibling, body.make(after: [sibling.startedLatch])])
    let ran = Locked(false)
    let cascade = SequentialGroup([inner, BlockTask { ran.mutate { $0 = true } }])
    let innerCounter = CancellationCounter()
    innerCounter.watch(inner)
    let cascadeCounter = CancellationCounter()
    cascadeCounter.watch(cascade)
    let running = Task { try await cascade.run() }
    let finished = await cascade.finishedSoon()
    #expect(finished)
    if !finished { cascade.cancel() }
    await #expect(throws: CancellationError.self) { try await running.value }
    #expect(inner.isCancelled && inner.error == nil)
    #expect(cascade.isCancelled && cascade.error == nil)
    #expect(!ran.value)
    #expect(innerCounter.count == 1 && cascadeCounter.count == 1)
  }

  /// A plain `JobController` keeps routing the task (its callbacks decide, as for a task that
  /// called `cancel()` on itself), and whatever its failure policy, the task is not a failure:
  /// not in `failures`, not collected, no fail-fast.
  @Test(arguments: SelfCancellingBody.allCases, [FailurePolicy.ignore, .collect, .failFast])
  func aJobControllerRoutesItAsACancelledTask(body: SelfCancellingBody, policy: FailurePolicy) async throws {
    final class Job: JobController, @unchecked Sendable {
      // @unchecked Sendable: `routed` is a `Locked`; `first` and `policy` are immutable.
      let first: ConcurrentOperation
      let policy: FailurePolicy
      let routed = Locked<[String]>([])
      init(first: ConcurrentOperation, policy: FailurePolicy) {
        self.first = first
        self.policy = policy
        super.init()
      }
      override func main() {
        failurePolicy = policy
        trackAndQueue(first) { [self] task in
          let error = task.error == nil ? "nil" : "set"
          routed.mutate { $0.append("first cancelled: \(task.isCancelled), error: \(error)") }
          trackAndQueue(BlockTask { self.routed.mutate { $0.append("next") } })
        }
      }
    }
    let job = Job(first: body.make(), policy: policy)
    let running = Task { try await job.run() }
    let finished = await job.finishedSoon()
    #expect(finished)
    if !finished { job.cancel() }
    try await running.value
    #expect(job.routed.value == ["first cancelled: true, error: nil", "next"])
    #expect(job.failures.isEmpty)
    #expect(!job.isCancelled && job.error == nil)
  }

  /// A retrying job does not retry it: a cancel is not a failure.
  @Test(arguments: [SelfCancellingBody.blockTaskSync, .workAsync])
  func aRetryPolicyDoesNotRetryIt(body: SelfCancellingBody) async throws {
    final class Job: JobController, @unchecked Sendable {
      // @unchecked Sendable: `attempts` is a `Locked`; `body` is immutable.
      let body: SelfCancellingBody
      let attempts = Locked(0)
      init(body: SelfCancellingBody) {
        self.body = body
        super.init()
      }
      override func main() {
        let make: @Sendable (Int) -> ConcurrentOperation = { [self] _ in
          attempts.mutate { $0 += 1 }
          return body.make()
        }
        trackAndQueue(retrying: RetryPolicy(maxAttempts: 3, initialDelay: .zero), make, completion: { _ in })
      }
    }
    let job = Job(body: body)
    let running = Task { try await job.run() }
    let finished = await job.finishedSoon()
    #expect(finished)
    if !finished { job.cancel() }
    try await running.value
    #expect(job.attempts.value == 1)
    #expect(job.failures.isEmpty)
  }
}
