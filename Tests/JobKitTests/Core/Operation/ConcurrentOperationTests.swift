import Foundation
import Testing

@testable import JobKit

@Suite("ConcurrentOperation")
struct ConcurrentOperationTests {
  /// What a group routing a finished task reads in one lock: the error, and whether `cancel()`
  /// was called before the finish (not after it, and not a stop that only records a reason).
  @Test func theFinishOutcomeTellsTheErrorAndACancelBeforeTheFinish() {
    let failed = ManualTask()
    failed.start()
    failed.finish(error: TestError(1))
    #expect(failed.finishOutcome.error as? TestError == TestError(1) && !failed.finishOutcome.cancelled)

    let cancelledWhileRunning = ManualTask()
    cancelledWhileRunning.start()
    cancelledWhileRunning.cancel()  // which finishes it
    #expect(cancelledWhileRunning.isFinished)
    #expect(cancelledWhileRunning.finishOutcome.error == nil && cancelledWhileRunning.finishOutcome.cancelled)

    // A reason recorded without a cancel (a job's `fail(_:)` or time limit records one), and
    // no error: not cancelled.
    let stoppedWithoutACancel = ManualTask()
    stoppedWithoutACancel.start()
    _ = stoppedWithoutACancel.state.withLock { $0.recordCancellationReason(TestError(2)) }
    stoppedWithoutACancel.finish()
    #expect(stoppedWithoutACancel.cancellationReason as? TestError == TestError(2))
    #expect(stoppedWithoutACancel.finishOutcome.error == nil && !stoppedWithoutACancel.finishOutcome.cancelled)

    let cancelledAfterItFinished = ManualTask()
    cancelledAfterItFinished.start()
    cancelledAfterItFinished.finish()
    cancelledAfterItFinished.cancel()
    #expect(!cancelledAfterItFinished.finishOutcome.cancelled)
  }

  @Test func startRunsOperationStartAndDoneFinishes() {
    let task = ManualTask()
    #expect(!task.isExecuting && !task.isFinished && task.isAsynchronous)
    task.start()
    #expect(task.didStart && task.isExecuting && !task.isFinished)
    task.finish(error: TestError(7))
    #expect(task.isFinished && !task.isExecuting)
    #expect(task.error as? TestError == TestError(7))
    #expect(task.misuses.isEmpty)
  }

  @Test func cancelledBeforeStartFinishesWithoutOperationStart() async {
    let task = ManualTask()
    task.cancel()
    #expect(task.cancelHookCalls == 0)
    let queue = OperationQueue()
    queue.addOperation(task)
    #expect(await task.finishedSoon())
    #expect(!task.didStart && task.isCancelled && task.error == nil && task.cancelHookCalls == 0)
  }

  @Test func onlyTheFirstOperationDoneCounts() {
    let task = ManualTask()
    QuietMisuse.silence(task)
    task.start()
    task.finish(error: TestError(1))
    task.finish(error: TestError(2))
    task.finish()
    #expect(task.error as? TestError == TestError(1))
    #expect(task.misuses == [JobKitError(.finishedTwice), JobKitError(.finishedTwice)])
  }

  @Test func operationDoneBeforeStartIsReportedAndIgnored() {
    let task = ManualTask()
    QuietMisuse.silence(task)
    task.finish()
    #expect(!task.isFinished)
    #expect(task.misuses == [JobKitError(.finishedBeforeStart)])
    task.start()
    #expect(task.didStart && task.isExecuting)
    task.finish()
    #expect(task.isFinished)
  }

  @Test func startingTwiceIsReportedAndIgnored() {
    let counter = Locked(0)
    final class Counting: ConcurrentOperation, @unchecked Sendable {
      let counter: Locked<Int>
      init(_ counter: Locked<Int>) { self.counter = counter }
      override func operationStart() { counter.mutate { $0 += 1 } }
    }
    let task = Counting(counter)
    QuietMisuse.silence(task)
    task.start()
    task.start()
    #expect(counter.value == 1)
    #expect(task.misuses == [JobKitError(.startedTwice)])
    task.operationDone()
  }

  @Test func cancelHookRunsOnceWhileRunning() {
    let task = ManualTask(finishesOnCancel: false)
    task.start()
    task.cancel()
    task.cancel()
    #expect(task.cancelHookCalls == 1 && task.isCancelled && !task.isFinished)
    task.finish()
    task.cancel()
    #expect(task.cancelHookCalls == 1)
  }

  @Test func cancelDuringOperationStartIsDeliveredAfterItReturns() {
    final class SelfCancelling: ConcurrentOperation, @unchecked Sendable {
      let log = EventLog()
      override func operationStart() {
        log.record("start begins")
        cancel()
        log.record("start ends")
      }
      override func operationCancelled() {
        log.record("cancelled")
        operationDone()
      }
    }
    let task = SelfCancelling()
    task.start()
    #expect(task.log.all == ["start begins", "start ends", "cancelled"])
    #expect(task.isFinished)
  }

  @Test func dependentsWaitForAnAsynchronousFinish() async {
    let queue = OperationQueue()
    let first = ManualTask("first")
    let log = EventLog()
    let second = BlockOperation { log.record("second ran") }
    second.addDependency(first)
    queue.addOperation(second)
    queue.addOperation(first)
    #expect(await first.startedLatch.waitOpen())
    log.record("first finishing")
    DispatchQueue.global().async { first.finish() }
    #expect(await second.finishedSoon())
    #expect(log.all == ["first finishing", "second ran"])
  }

  @Test func completionBlockRunsAfterFinish() async {
    let task = ManualTask()
    let latch = Latch()
    let sawFinished = Locked(false)
    task.completionBlock = { [unowned task] in
      sawFinished.mutate { $0 = task.isFinished }
      latch.open()
    }
    OperationQueue().addOperation(task)
    #expect(await task.startedLatch.waitOpen())
    DispatchQueue.global().async { task.finish() }
    #expect(await latch.waitOpen())
    #expect(sawFinished.value)
    task.completionBlock = nil
  }

  @Test func waitUntilFinishedReturnsAfterAFinishFromAnotherThread() async {
    let task = ManualTask()
    OperationQueue().addOperation(task)
    #expect(await task.startedLatch.waitOpen())
    DispatchQueue.global().async { task.finish() }
    // `waitUntilFinished()` blocks: on a thread of its own, not one of Swift concurrency's.
    await onThread { task.waitUntilFinished() }
    #expect(task.isFinished)
  }

  @Test func serialQueueRunsAsynchronousOperationsOneAtATime() async {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let running = Locked((now: 0, max: 0))
    final class Overlapping: ConcurrentOperation, @unchecked Sendable {
      let running: Locked<(now: Int, max: Int)>
      init(_ running: Locked<(now: Int, max: Int)>) { self.running = running }
      override func operationStart() {
        running.mutate {
          $0.now += 1
          $0.max = Swift.max($0.max, $0.now)
        }
        DispatchQueue.global().async {
          self.running.mutate { $0.now -= 1 }
          self.operationDone()
        }
      }
    }
    let tasks = (0..<200).map { _ in Overlapping(running) }
    for task in tasks { queue.addOperation(task) }
    // Waits on a thread of its own: blocking one of Swift concurrency's two threads (on a
    // 2-core machine) while the tasks need dispatch threads starved the other tests.
    #expect(await tasks.last!.finishedSoon())
    #expect(tasks.allSatisfy { $0.isFinished })
    #expect(running.value.max == 1)
  }

  @Test func waitForFinishThrowsTheOutcome() async throws {
    let failing = InstantTask(failure: TestError(3))
    OperationQueue().addOperation(failing)
    await #expect(throws: TestError(3)) { try await failing.waitForFinish() }

    let succeeding = InstantTask()
    OperationQueue().addOperation(succeeding)
    try await succeeding.waitForFinish()

    let cancelled = ManualTask()
    cancelled.cancel()
    OperationQueue().addOperation(cancelled)
    await #expect(throws: CancellationError.self) { try await cancelled.waitForFinish() }
  }

  @Test func waitForFinishStopsWaitingWhenItsTaskIsCancelled() async {
    let task = ManualTask(finishesOnCancel: false)
    task.start()
    let waiter = Task { try await task.waitForFinish() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(!task.isCancelled)
    task.finish()
  }

  /// Invariant: however `operationDone` and `cancel` race, each operation finishes exactly once
  /// (its observer hears of it once) and at most one of the two calls is reported as a second
  /// finish.
  @Test func racingDoneAndCancelFinishExactlyOnce() async {
    final class CountingObserver: OperationFinishObserver, @unchecked Sendable {
      let calls = Locked(0)
      func operationDidFinish(_ operation: ConcurrentOperation) { calls.mutate { $0 += 1 } }
    }
    let count = 2_000
    let tasks = (0..<count).map { _ in ManualTask(finishesOnCancel: true) }
    QuietMisuse.silence(tasks)
    let observers = tasks.map { _ in CountingObserver() }
    for (task, observer) in zip(tasks, observers) {
      task.start()
      #expect(task.addFinishObserver(observer))
    }
    await concurrently(count * 2) { index in
      let task = tasks[index / 2]
      if index % 2 == 0 { task.finish(error: TestError(index)) } else { task.cancel() }
    }
    for (task, observer) in zip(tasks, observers) {
      #expect(task.isFinished)
      #expect(observer.calls.value == 1)
      #expect(task.misuses.count <= 1)
    }
  }
}

/// An operation that finishes only when cancelled, and whose `isCancelled`, read by `start()`
/// before it takes its lock, lets a `cancel()` on another thread run to its end right then (the
/// value returned is the one read before that cancel).
private final class CancelDuringStart: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `armed` is only touched by the thread calling `start()`.
  private var armed = true

  override var isCancelled: Bool {
    let value = super.isCancelled
    if armed {
      armed = false
      let cancelled = DispatchSemaphore(value: 0)
      Thread { [self] in
        cancel()
        cancelled.signal()
      }.start()
      _ = cancelled.wait(timeout: .now() + 30)
    }
    return value
  }

  override func operationStart() {}

  override func operationCancelled() {
    operationDone()
  }
}

extension ConcurrentOperationTests {
  /// A cancel that lands while `start()` runs but before it took its lock is not lost: the
  /// operation starts cancelled (it used to run `operationStart()` and never hear of the cancel,
  /// so an operation that finishes on cancel never finished).
  @Test func aCancelLandingAsStartBeginsIsNotLost() async throws {
    let operation = CancelDuringStart()
    await onThread { operation.start() }
    #expect(await operation.finishedSoon(within: 30))
    #expect(operation.isCancelled)
  }
}

extension ConcurrentOperationTests {
  enum Kind: String, CaseIterable, Sendable {
    case subclass, blockTask, work, pipeline

    func make(ran: Locked<Bool>) -> ConcurrentOperation {
      switch self {
      case .subclass:
        return ManualTask()
      case .blockTask:
        return BlockTask { ran.mutate { $0 = true } }
      case .work:
        return Work { ran.mutate { $0 = true } }
      case .pipeline:
        return Pipeline.start { ran.mutate { $0 = true } }
      }
    }
  }

  /// A start that lands after a `cancel()` recorded the cancel in the operation's state (its first
  /// step) but before that `cancel()` called Foundation's own: the work is skipped and
  /// Foundation's `isCancelled` is `true` once the operation finished (Foundation's `cancel()`
  /// does nothing on a finished operation, so the skipping start sets it).
  @Test(arguments: Kind.allCases)
  func aStartBetweenACancelsTwoStepsSkipsTheWorkAndSaysCancelled(kind: Kind) {
    let ran = Locked(false)
    let operation = kind.make(ran: ran)
    _ = operation.state.withLock { $0.recordCancel() }
    operation.start()
    #expect(operation.isFinished && !ran.value)
    #expect((operation as? ManualTask)?.didStart != true)
    #expect(operation.isCancelled)
    operation.cancel()  // the cancel's second step, after the finish: no change
    #expect(operation.isCancelled && operation.error == nil)
  }
}
