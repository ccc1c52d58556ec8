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

/// An object whose `deinit` calls back into a job, as user code may. JobKit must never let the
/// last reference to such an object go while it holds the job's lock: the callback would
/// deadlock on the same thread.
private final class ReentrantDeinit: @unchecked Sendable {
  // @unchecked Sendable: `job` is set once, before the object is shared.
  weak var job: JobController?
  let deinits: Locked<Int>

  init(job: JobController?, deinits: Locked<Int>) {
    self.job = job
    self.deinits = deinits
  }

  deinit {
    if let job {
      _ = job.failures
      _ = job.debugDescription
    }
    deinits.mutate { $0 += 1 }
  }
}

/// A failing attempt whose `deinit` calls back into its job.
private final class ReentrantFailingAttempt: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `canary` is set once, before the task is tracked.
  let canary: ReentrantDeinit

  init(canary: ReentrantDeinit) {
    self.canary = canary
    super.init()
  }

  override func operationStart() { operationDone(error: TestError(1)) }
}

extension JobControllerLockPurityTests {
  /// The job drops its group handlers when it finishes; this one, set for a group that never had
  /// a task, held the last reference.
  @Test func aDroppedGroupHandlersCapturesAreReleasedAfterTheLock() async throws {
    let deinits = Locked(0)
    let job = ScriptedJob { job in
      job.setCompletion(forGroup: BlockOperation.self) { [captured = ReentrantDeinit(job: job, deinits: deinits)] in
        withExtendedLifetime(captured) {}
      }
      job.trackAndQueue(InstantTask("plain"))
    }
    job.startJob()
    #expect(await job.finishedSoon(within: 30))
    #expect(await eventually(within: .seconds(30)) { deinits.value == 1 })
  }

  /// A handler replaced by a later one held the last reference.
  @Test func aReplacedGroupHandlersCapturesAreReleasedAfterTheLock() async throws {
    let deinits = Locked(0)
    let job = ScriptedJob { job in
      job.setCompletion(forGroup: InstantTask.self) { [captured = ReentrantDeinit(job: job, deinits: deinits)] in
        withExtendedLifetime(captured) {}
      }
      job.setCompletion(forGroup: InstantTask.self) {}
      job.trackAndQueue(InstantTask("plain"))
    }
    job.startJob()
    #expect(await job.finishedSoon(within: 30))
    #expect(await eventually(within: .seconds(30)) { deinits.value == 1 })
  }

  /// A failed attempt replaced by its retry: the job held the last reference to it.
  @Test func aReplacedAttemptIsReleasedAfterTheLock() async throws {
    let clock = ManualClock()
    let deinits = Locked(0)
    let job = ScriptedJob { job in
      let options = TaskOptions(retry: RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: false))
      job.trackAndQueue(options: options) { attempt -> Operation in
        attempt == 1 ? ReentrantFailingAttempt(canary: ReentrantDeinit(job: job, deinits: deinits)) : InstantTask()
      } completion: { _ in
      }
    }
    job.clock = clock
    job.startJob()
    #expect(await clock.waitForScheduled(1))  // the retry delay
    // On a thread of its own: the retry is tracked on the advancing thread, which would hang
    // (and with it the test) if the replaced attempt's deinit ran under the job's lock.
    Thread { clock.advance(by: .seconds(1)) }.start()
    #expect(await job.finishedSoon(within: 30))
    #expect(await eventually(within: .seconds(30)) { deinits.value == 1 })
  }
}
