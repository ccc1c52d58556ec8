import Foundation
import Testing

@testable import JobKit

/// A task that finishes when told: it keeps its job open while tasks tracked from outside
/// `main()` run in it, then lets it finish.
@Suite("KeepAliveTask", .timeLimit(.minutes(1)))
struct KeepAliveTaskTests {
  final class ServingJob: JobController, @unchecked Sendable {
    let keepAlive = KeepAliveTask()
    override func main() { trackAndQueue(keepAlive) }
  }

  @Test func aJobKeptAliveRunsTasksTrackedLaterAndFinishesAfterTheRelease() async throws {
    let job = ServingJob()
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await job.run() }
      #expect(await eventually { job.keepAlive.isExecuting })
      for value in 0..<3 {
        let work = Work<Int> { value * 2 }
        job.trackAndQueue(work)
        #expect(try await work.run() == value * 2)
      }
      // Every tracked task finished; the job still serves.
      #expect(!job.isFinished)
      job.keepAlive.release()
      try await group.waitForAll()
    }
    #expect(job.isFinished && !job.isCancelled)
    #expect(job.keepAlive.isFinished && !job.keepAlive.isCancelled)
    #expect(job.keepAlive.isReleased)
  }

  @Test func aReleaseBeforeTheStartFinishesItWhenItStarts() async throws {
    let task = KeepAliveTask()
    task.release()
    #expect(!task.isFinished)
    OperationQueue().addOperation(task)
    try await task.waitForFinish()
    #expect(!task.isCancelled)
    #expect(task.misuses.isEmpty)
  }

  @Test func aReleaseAfterTheStartFinishesItOnceAndLaterReleasesDoNothing() async throws {
    let task = KeepAliveTask()
    OperationQueue().addOperation(task)
    #expect(await eventually { task.isExecuting })
    task.release()
    task.release()
    try await task.waitForFinish()
    task.release()
    #expect(!task.isCancelled)
    #expect(task.misuses.isEmpty)
  }

  @Test func aCancelEndsItCancelledAndALaterReleaseDoesNothing() async throws {
    let task = KeepAliveTask()
    OperationQueue().addOperation(task)
    #expect(await eventually { task.isExecuting })
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.waitForFinish() }
    task.release()
    #expect(task.isCancelled && task.isFinished)
    #expect(task.misuses.isEmpty)
  }

  @Test func aJobCancelledWhileKeptAliveFinishesCancelled() async throws {
    let job = ServingJob()
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try? await job.run() }
      #expect(await eventually { job.keepAlive.isExecuting })
      job.cancel()
      try await group.waitForAll()
    }
    #expect(job.isFinished && job.isCancelled)
    #expect(job.keepAlive.isCancelled)
  }
}
