import Foundation
import Testing

@testable import JobKit

/// Each test calls `runAndWait()` on a thread of its own (see `onThread`), never on a Swift
/// concurrency thread.
@Suite("runAndWait")
struct RunAndWaitTests {
  /// COSyncOperation: the caller blocks until the operation finished, even when it finishes on
  /// another thread.
  @Test func startsTheOperationAndBlocksUntilItFinished() async throws {
    let log = EventLog()
    let step = Step("later", log: log, finish: .later)
    let finishedOnReturn = await onThread { () -> Bool in
      try? step.runAndWait()
      return step.isFinished
    }
    #expect(finishedOnReturn && log.all == ["later"])
  }

  @Test func throwsTheOperationsError() async {
    let outcome = await onThread { () -> TestError? in
      do {
        try Step("fails", log: EventLog(), finish: .later, failure: TestError(3)).runAndWait()
        return nil
      } catch {
        return error as? TestError
      }
    }
    #expect(outcome == TestError(3))
  }

  @Test func throwsCancellationErrorForACancelledOperation() async {
    let started = Latch()
    let task = BlockTask(async: {
      started.open()
      try await suspendUntilCancelled()
    })
    Task {
      _ = await started.opened()
      task.cancel()
    }
    let threw = await onThread { () -> Bool in
      do {
        try task.runAndWait()
        return false
      } catch {
        return error is CancellationError
      }
    }
    #expect(threw)
  }

  /// Waiting for a whole group tree: every leaf finished when it returns.
  @Test func waitsForAWholeGroup() async {
    let log = EventLog()
    let leaves = (0..<4).map { Step("\($0)", log: log, finish: .later) }
    let group = SequentialGroup([leaves[0], ConcurrentGroup([leaves[1], leaves[2]]), leaves[3]])
    let allFinished = await onThread { () -> Bool in
      try? group.runAndWait()
      return leaves.allSatisfy { $0.isFinished }
    }
    #expect(allFinished && log.all.count == 4)
  }

  /// A job the caller already started is waited for, not started again and not reported.
  @Test func waitsForAJobAlreadyStartedWithoutReportingAMisuse() async {
    let gate = ManualTask()
    let group = ConcurrentGroup([gate])
    group.startJob()
    Task {
      _ = await gate.startedLatch.opened()
      gate.finish()
    }
    await onThread { try? group.runAndWait() }
    #expect(group.isFinished && group.misuses.isEmpty)
  }

  @Test func returnsAtOnceForAFinishedOperation() async {
    let task = BlockTask {}
    task.start()
    let threw = await onThread { () -> Bool in
      do {
        try task.runAndWait()
        return false
      } catch {
        return true
      }
    }
    #expect(!threw && task.misuses.isEmpty)
  }

  /// CompositeOperations' non-blocking tests: three nested `runAndWait` calls do not deadlock.
  @Test func nestedCallsDoNotDeadlock() async {
    let count = Locked(0)
    let outer = BlockTask {
      count.mutate { $0 += 1 }
      try BlockTask {
        count.mutate { $0 += 1 }
        try BlockTask { count.mutate { $0 += 1 } }.runAndWait()
      }.runAndWait()
    }
    await onThread { try? outer.runAndWait() }
    #expect(count.value == 3)
  }
}
