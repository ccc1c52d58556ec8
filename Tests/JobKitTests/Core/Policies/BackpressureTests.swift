import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Counts the instances alive (made and not yet freed), and the most ever alive at once.
private final class LiveCounter: @unchecked Sendable {
  // @unchecked Sendable: every field is only touched while holding `lock`.
  private let lock = NSLock()
  private var live = 0
  private var peak = 0
  func born() {
    lock.withLock {
      live += 1
      peak = max(peak, live)
    }
  }
  func died() { lock.withLock { live -= 1 } }
  var values: (live: Int, peak: Int) { lock.withLock { (live, peak) } }
}

/// A task that finishes at once and tells `counter` when it is made and freed.
private final class CountedLifeTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let counter: LiveCounter
  init(_ counter: LiveCounter) {
    self.counter = counter
    counter.born()
  }
  deinit { counter.died() }
  override func operationStart() { operationDone() }
}

/// A job kept open by a gate task (of a group of its own) until the test opens it, so
/// producers outside add to it. The gate waits as long as the suite may run: a producer of
/// 100,000 tasks beside every other suite takes over 20 s on 2 cores, and a gate that gave up
/// first would finish the job under the producer (a hang fails by the suite's time limit).
final class OpenJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let started = Latch()
  let release = Latch()
  override func main() {
    trackAndQueue(
      BlockTask(async: { [started, release] in
        started.open()
        _ = await release.waitOpen(timeout: 600)
      }))
  }
}

/// An `OpenJob` whose `TestTask`s run one at a time with at most `maxQueued` queued, started;
/// returns once its gate runs.
private func startedOpenJob(maxQueued: Int) async -> OpenJob {
  let job = OpenJob()
  job.setMaxConcurrentTasks(1, forGroup: TestTask.self)
  job.setMaxQueuedTasks(maxQueued, forGroup: TestTask.self)
  job.startJob()
  #expect(await job.started.waitOpen())
  return job
}

/// Finishes each of `tasks` once it started, in order, then lets `job` finish and waits for it.
private func finishInTurn(_ tasks: [TestTask], then job: OpenJob) async throws {
  for task in tasks {
    #expect(await task.startedLatch.waitOpen())
    task.finish()
  }
  job.release.open()
  try await job.run()
}

@Suite("Backpressure", .timeLimit(.minutes(10)))
struct BackpressureTests {
  @Test func tryTrackAndQueueRefusesAtTheBoundAndARefusedTaskIsUntouched() async throws {
    let job = await startedOpenJob(maxQueued: 2)
    let tasks = (0..<4).map { TestTask("t\($0)") }
    let routed = Locked(0)
    let accepted = tasks.map { job.tryTrackAndQueue($0) { _ in routed.mutate { $0 += 1 } } }
    #expect(accepted == [true, true, true, false])
    let refused = tasks[3]
    #expect(await tasks[0].startedLatch.waitOpen())
    #expect(job.progress.totalUnitCount == 4)  // the gate and the three accepted
    tasks[0].finish()
    // A slot freed: the line moves up and there is room again.
    #expect(await tasks[1].startedLatch.waitOpen())
    // A finished task counts until it is routed (its memory is held until then).
    #expect(await eventually { routed.value == 1 })
    #expect(job.tryTrackAndQueue(refused) { _ in routed.mutate { $0 += 1 } })
    #expect(!job.tryTrackAndQueue(TestTask("over")) { _ in })
    try await finishInTurn(Array(tasks.dropFirst()), then: job)
    #expect(routed.value == 4)
  }

  @Test func aRefusedTaskIsNeitherStartedNorCancelledNorRouted() async throws {
    let job = await startedOpenJob(maxQueued: 0)
    let running = TestTask("running")
    let refused = TestTask("refused")
    let routed = Locked<[String]>([])
    #expect(job.tryTrackAndQueue(running) { task in routed.mutate { $0.append(task.label) } })
    #expect(!job.tryTrackAndQueue(refused) { task in routed.mutate { $0.append(task.label) } })
    job.cancel()
    job.release.open()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(routed.value.isEmpty)  // a stopped job skips per-task callbacks
    #expect(running.isCancelled && !refused.isCancelled && !refused.didStart && !refused.isFinished)
  }

  @Test func aProducerWaitsForRoomAndLearnsWhenTheJobFinished() async throws {
    let job = await startedOpenJob(maxQueued: 1)
    QuietMisuse.silence(job)
    let first = TestTask("first")
    let second = TestTask("second")
    #expect(job.tryTrackAndQueue(first) { _ in })
    #expect(job.tryTrackAndQueue(second) { _ in })
    let third = TestTask("third")
    #expect(!job.tryTrackAndQueue(third) { _ in })
    let waited = Task { try await job.waitForRoom(inGroup: TestTask.self) }
    #expect(await first.startedLatch.waitOpen())
    first.finish()
    #expect(try await waited.value)  // woken once `first` was routed
    #expect(job.tryTrackAndQueue(third) { _ in })
    try await finishInTurn([second, third], then: job)
    #expect(try await !job.waitForRoom(inGroup: TestTask.self))
    // A producer still asking once the job finished has outlived it.
    #expect(job.misuses.map(\.code) == [.producerOutlivedJob])
  }

  @Test func aNegativeBoundIsReportedAndIgnored() {
    let job = OpenJob()
    job.setMaxQueuedTasks(-1, forGroup: TestTask.self)
    #expect(job.misuses == [JobKitError(.invalidLimit)])
  }

  /// A producer outside the job offers `JOBKIT_BACKPRESSURE_TASKS` tasks (100,000 by default;
  /// 1,000,000 in CI's `.ci/run`) to a group limited to 4 at once with at most 16 queued, making
  /// each task only once the previous one was accepted. The bound counts every tracked task of
  /// the group that holds no slot and was not routed (waiting, or finished and waiting for its
  /// callback), so tasks alive at once stay within 4 running + 16 queued + 1 in the producer's
  /// hand + the few routed ones a worker thread or the queue still holds as it lets go of them:
  /// 64, whatever the number produced. Without the bound the producer would hold every task in
  /// the job at once.
  @Test func aProducerOfManyTasksStaysWithinAMemoryBound() async throws {
    let count = ProcessInfo.processInfo.environment["JOBKIT_BACKPRESSURE_TASKS"].flatMap(Int.init) ?? 100_000
    let counter = LiveCounter()
    let job = OpenJob()
    job.setMaxConcurrentTasks(4, forGroup: CountedLifeTask.self)
    job.setMaxQueuedTasks(16, forGroup: CountedLifeTask.self)
    job.startJob()
    #expect(await job.started.waitOpen())
    let routed = Locked(0)
    for _ in 0..<count {
      let task = CountedLifeTask(counter)
      while !job.tryTrackAndQueue(task, completion: { _ in routed.mutate { $0 += 1 } }) {
        // `false`: the job finished, so no room will come; stop rather than spin.
        guard try await job.waitForRoom(inGroup: CountedLifeTask.self) else {
          Issue.record("the job finished while the producer still had tasks to offer")
          job.release.open()
          return
        }
      }
    }
    job.release.open()
    try await job.run()
    #expect(routed.value == count)
    #expect(await eventually { counter.values.live == 0 })
    let peak = counter.values.peak
    #expect(peak <= 64, "peak \(peak) tasks alive")
    print("backpressure: \(count) tasks, at most \(peak) alive at once")
  }
}
