import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task whose overridable members call back into the job that tracks it. JobKit's locks are
/// not recursive: if JobKit read any of these members while holding the job's lock, the
/// callback would deadlock on the same thread.
private final class ReentrantTask: BlockOperation, ProgressReporting, @unchecked Sendable {
  // @unchecked Sendable: `job` is set once before the task is tracked; the rest is Foundation's.
  weak var job: JobController?
  let ownProgress = Progress(totalUnitCount: 1)

  private func touchJob(readingFraction: Bool = true) {
    guard let job else { return }
    _ = job.debugDescription
    _ = job.failures
    _ = job.failurePolicy
    if readingFraction {
      // Not from `progress`: the job's fraction reads this task's progress (endless recursion).
      _ = job.fractionCompleted
    }
  }

  override var name: String? {
    get {
      touchJob()
      return "reentrant"
    }
    set { super.name = newValue }
  }

  override var isFinished: Bool {
    touchJob()
    return super.isFinished
  }

  override var isCancelled: Bool {
    touchJob()
    return super.isCancelled
  }

  override var completionBlock: (@Sendable () -> Void)? {
    get {
      touchJob()
      return super.completionBlock
    }
    set { super.completionBlock = newValue }
  }

  override var description: String {
    touchJob()
    return "ReentrantTask"
  }

  var progress: Progress {
    touchJob(readingFraction: false)
    return ownProgress
  }
}

/// A `ConcurrentOperation` whose `name` calls back into its job.
private final class ReentrantConcurrentTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `job` is set once before the task is tracked.
  weak var job: JobController?

  override var name: String? {
    get {
      if let job {
        _ = job.debugDescription
        _ = job.fractionCompleted
      }
      return "reentrant-concurrent"
    }
    set { super.name = newValue }
  }
}

@Suite("Nothing but state under a lock")
struct JobControllerLockPurityTests {
  /// Every feature that reads a task's members (events with names, progress with nested
  /// reporters, timeouts that ask `isFinished`, failures, plain-operation hooks) runs with tasks
  /// that call back into the job from those members; a read under the lock would deadlock.
  @Test(arguments: [false, true])
  func tasksCallingBackIntoTheJobFromTheirMembersNeverDeadlock(listening: Bool) async throws {
    let clock = ManualClock()
    let job = ScriptedJob { job in
      _ = job.progress
      for index in 0..<20 {
        let plain = ReentrantTask {}
        plain.job = job
        if index.isMultiple(of: 2) {
          job.trackAndQueue(plain, timeout: .seconds(60)) { _ in }
        } else {
          job.trackAndQueue(plain) { _ in }
        }
        let concurrent = ReentrantConcurrentTask()
        concurrent.job = job
        job.trackAndQueue(concurrent)
      }
    }
    job.clock = clock
    let events = listening ? job.events : nil
    let collected = Task { () -> Int in
      var count = 0
      if let events {
        for await _ in events { count += 1 }
      }
      return count
    }
    job.startJob()
    #expect(await job.finishedSoon(within: 20))
    clock.advance(by: .seconds(60))
    try await job.run()
    #expect(job.fractionCompleted == 1)
    let eventCount = await collected.value
    if listening {
      // started, 40 × (tracked, finished), 20 × started (concurrent tasks), 2 groups, all, finished
      #expect(eventCount >= 1 + 40 * 2 + 20 + 2 + 1 + 1)
    }
  }
}
