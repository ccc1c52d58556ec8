import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// The job's door (`JobController.withJobState`): whatever a transition leaves to do after the
/// lock (admission effects, a drain) is taken with its lock and done after it, whichever caller
/// made the change: a setter, a timer, a stop.
@Suite("The job's door")
struct JobDoorTests {
  private final class Limited: BlockOperation, @unchecked Sendable {}

  /// A job whose state the synchronous test drives directly (never started).
  private let job = JobController()

  /// A started state whose `main()` returned, with one task of a rate-limited group tracked.
  private func stateWithTrackedTask() -> (state: JobState, node: TaskNode?, queue: OperationQueue) {
    var state = JobState()
    _ = state.beginMain(on: 1)
    state.mainReturned()
    let queue = OperationQueue()
    _ = state.setRateLimit(tasksPerSecond: 1, burst: 1, for: Limited.self)
    let task = Limited()
    guard case .tracked(let node, _, _, _, _, _) = state.track(task, node: TaskNode(job: job, task: task), queue: queue)
    else { return (state, nil, queue) }
    return (state, node, queue)
  }

  @Test func theEffectsATransitionLeavesAreTakenOnce() throws {
    var (state, tracked, queue) = stateWithTrackedTask()
    let node = try #require(tracked)
    let admitted = state.admitOrWait(node, queue: queue)  // takes the token: a refill is due
    let after = state.afterTransition(.afterActions, on: 2)
    let check1 = admitted && after.effects?.isEmpty == false && after.role == .none
    #expect(check1)
    let check2 = state.afterTransition(.now, on: 2).effects == nil
    #expect(check2)
  }

  @Test func theClaimIsAsAskedAndAStopWaitsForItsActions() throws {
    var (state, tracked, _) = stateWithTrackedTask()
    let node = try #require(tracked)
    _ = state.recordFinish(node)
    let check1 = state.afterTransition(.afterActions, on: 2).role == .none  // the task waits
    #expect(check1)
    let check2 = state.afterTransition(.now, on: 2).role == .drainer
    #expect(check2)
    let check3 = state.afterTransition(.now, on: 3).role == .none  // thread 2 drains
    #expect(check3)
    // A door on the drainer's own thread (inside a callback) starts no second loop: the route
    // is the outer loop's; a nested drain only takes events and progress.
    let check4 = state.afterTransition(.now, on: 2).role == .none
    #expect(check4)
    _ = state.installProgress(Progress(parent: nil, userInfo: nil))  // counts to publish
    let check5 = state.afterTransition(.now, on: 2).role == .nested
    #expect(check5)
  }

  /// A setter's transition (a raised limit) admits a waiting task, which makes room under the
  /// group's bound: the producer waiting for room is woken by the door, with no other event
  /// (no task finishes meanwhile).
  @Test func raisingALimitWakesTheProducerItsAdmissionMadeRoomFor() async throws {
    let first = ManualTask("first")
    let second = ManualTask("second")
    let job = ScriptedJob { job in
      job.trackAndQueue(first)
      job.trackAndQueue(second)
    }
    job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
    job.setMaxQueuedTasks(1, forGroup: ManualTask.self)
    job.startJob()
    #expect(await first.startedLatch.waitOpen())
    // `second` waits for the slot (once `main()` tracked it: `first` may start before), so the
    // bound of 1 is reached: a producer waits for room.
    let key = ObjectIdentifier(ManualTask.self)
    #expect(
      await eventually {
        job.readJobState { state in state.registry.groups[key].map { state.admission.waitingForSlot(of: $0) } == 1 }
      })
    let room = Locked<Bool?>(nil)
    let woken = Latch()
    let producer = Task {
      let result = try await job.waitForRoom(inGroup: ManualTask.self)
      room.mutate { $0 = result }
      woken.open()
    }
    #expect(await eventually { job.readJobState { $0.registry.groups[key]?.bound?.hasWaiters == true } })
    job.setMaxConcurrentTasks(2, forGroup: ManualTask.self)
    #expect(await second.startedLatch.waitOpen())
    #expect(await woken.waitOpen())
    #expect(room.value == true)
    first.finish()
    second.finish()
    try await job.run()
    producer.cancel()
  }

  /// A stop claims its drain once its actions were carried out: the failed attempt waiting for
  /// its retry is routed, and the job finishes, on the cancelling thread before `cancel()`
  /// returns (the retry's clock never moves, no task finishes).
  @Test func aStopRoutesTheAttemptWaitingForItsRetryBeforeTheCancelReturns() async throws {
    let log = Locked<[(attempt: Int, at: ContinuousClock.Instant)]>([])
    let failed = Latch()
    let clock = ManualClock()
    let policy = RetryPolicy(maxAttempts: 2, initialDelay: .seconds(60), jitter: false)
    let make: @Sendable (Int) -> FlakyTask = { attempt in
      FlakyTask(attempt: attempt, failingAttempts: [1], log: log, finished: failed)
    }
    let job = ScriptedJob { job in
      job.trackAndQueue(retrying: policy, make) { _ in }
    }
    job.clock = clock
    job.cancellationGracePeriod = nil  // no grace timer: the stop's own claim is its only door
    job.startJob()
    #expect(await failed.waitOpen())
    #expect(await clock.waitForScheduled(1))
    #expect(await eventually { job.readJobState { $0.phase.hasMainReturned } })  // main() returned
    job.cancel()
    #expect(job.isFinished)
    // Bounded: without the stop's drain nothing else would route the attempt, and `run()` hangs.
    guard await eventually({ job.isFinished }) else {
      Issue.record("the stopped job never finished")
      return
    }
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(log.value.map(\.attempt) == [1])
  }
}
