import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// An upload that finishes on another thread, so producers really wait for room.
private final class Upload: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `delivered` is thread-safe.
  let item: Int
  let delivered: Locked<[Int]>
  init(_ item: Int, _ delivered: Locked<[Int]>) {
    self.item = item
    self.delivered = delivered
  }
  override func operationStart() {
    DispatchQueue.global().async { [self] in
      delivered.mutate { $0.append(item) }
      operationDone()
    }
  }
}

/// The *Scope control* article's backpressure example, as a reader copies it: the producer is a
/// task of the job.
private final class Uploads: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `delivered` is thread-safe.
  let items: [Int]
  let delivered = Locked<[Int]>([])
  init(_ items: [Int]) {
    self.items = items
    super.init()
  }

  override func main() {
    setMaxConcurrentTasks(4, forGroup: Upload.self)
    setMaxQueuedTasks(16, forGroup: Upload.self)
    // The producer is a task of the job: the job finishes only after it returned.
    trackAndQueue(
      Work(async: { [self] in
        for item in items {
          let upload = Upload(item, delivered)
          while !tryTrackAndQueue(upload, completion: { _ in }) {
            guard try await waitForRoom(inGroup: Upload.self) else { return }  // the job finished
          }
        }
      }))
  }
}

/// A job whose producer task waits for room behind `blocker`, which holds the group's only slot
/// (no task may wait: a bound of 0) until the job stops.
private final class BlockedProducer: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `outcome` is thread-safe.
  let blocker = TestTask("blocker")
  let outcome = Locked<Result<Void, any Error>?>(nil)
  override func main() {
    setMaxConcurrentTasks(1, forGroup: TestTask.self)
    setMaxQueuedTasks(0, forGroup: TestTask.self)
    trackAndQueue(blocker)
    // A stopped job routes nothing: the producer records what its wait threw itself.
    trackAndQueue(
      Work(async: { [self] in
        do {
          while !tryTrackAndQueue(TestTask("more"), completion: { _ in }) {
            guard try await waitForRoom(inGroup: TestTask.self) else { return }
          }
          outcome.mutate { $0 = .success(()) }
        } catch {
          outcome.mutate { $0 = .failure(error) }
          throw error
        }
      }))
  }

  /// Whether a producer waits for room in `TestTask`'s group.
  var producerWaits: Bool {
    readJobState { $0.registry.groups[ObjectIdentifier(TestTask.self)]?.bound?.hasWaiters == true }
  }
}

@Suite("Backpressure producers", .timeLimit(.minutes(10)))
struct BackpressureProducerTests {
  @Test func theArticlesProducerDeliversEveryItem() async throws {
    let job = Uploads(Array(0..<200))
    try await job.run()
    #expect(job.delivered.value.sorted() == Array(0..<200))
    #expect(job.misuses.isEmpty)
  }

  /// The example as it read before: the producer outside the job. The job may finish under it;
  /// whatever it then loses is reported, never silent.
  @Test func aProducerOutsideTheJobNeverLosesItemsSilently() async throws {
    let job = ScriptedJob { _ in }
    QuietMisuse.silence(job)
    job.setMaxConcurrentTasks(4, forGroup: Upload.self)
    job.setMaxQueuedTasks(16, forGroup: Upload.self)
    let delivered = Locked<[Int]>([])
    job.startJob()
    producing: for item in 0..<200 {
      let upload = Upload(item, delivered)
      while !job.tryTrackAndQueue(upload, completion: { _ in }) {
        guard try await job.waitForRoom(inGroup: Upload.self) else { break producing }
      }
    }
    try await job.waitForFinish()
    let reported = job.misuses.map(\.code).filter { $0 == .producerOutlivedJob || $0 == .trackedAfterJobFinished }
    #expect(delivered.value.count == 200 || !reported.isEmpty)
  }

  @Test func waitingForRoomAfterTheJobFinishedIsReported() async throws {
    let job = ScriptedJob { $0.trackAndQueue(InstantTask()) }
    QuietMisuse.silence(job)
    job.setMaxConcurrentTasks(1, forGroup: InstantTask.self)
    job.setMaxQueuedTasks(0, forGroup: InstantTask.self)
    try await job.run()
    #expect(try await !job.waitForRoom(inGroup: InstantTask.self))
    #expect(job.misuses.map(\.code) == [.producerOutlivedJob])
  }

  @Test func aStoppedJobsProducerGetsTheJobsReasonNotAMisuse() async throws {
    let job = ScriptedJob { $0.trackAndQueue(InstantTask()) }
    job.setMaxConcurrentTasks(1, forGroup: InstantTask.self)
    job.setMaxQueuedTasks(0, forGroup: InstantTask.self)
    job.cancel(reason: TestError(7))
    try? await job.run()
    await #expect(throws: TestError(7)) { try await job.waitForRoom(inGroup: InstantTask.self) }
    #expect(job.misuses.isEmpty)
  }

  /// The producer, a task of the job, waits for room when the job's time limit runs out: the
  /// wait throws the limit's error, as `run()` does.
  @Test func atATimeLimitWaitForRoomThrowsTheJobsReason() async throws {
    let clock = ManualClock()
    let job = BlockedProducer()
    job.clock = clock
    job.timeLimit = .seconds(1)
    job.startJob()
    #expect(await job.blocker.startedLatch.waitOpen())
    #expect(await eventually { job.producerWaits })
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(1))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await job.run() }
    guard case .failure(let error as JobKitError)? = job.outcome.value else {
      Issue.record("the producer did not fail with a JobKitError: \(String(describing: job.outcome.value))")
      return
    }
    #expect(error.code == .timeLimitExceeded)
  }

  @Test func tryTrackAndQueueResultOfRefusesAtTheBoundAndDeliversTheResult() async throws {
    let hold = Latch()
    let results = Locked<[Int]>([])
    let job = OpenJob()
    job.setMaxConcurrentTasks(1, forGroup: Work<Int>.self)
    job.setMaxQueuedTasks(1, forGroup: Work<Int>.self)
    job.startJob()
    #expect(await job.started.waitOpen())
    let record: @Sendable (Result<Int, any Error>) -> Void = { result in
      if case .success(let value) = result { results.mutate { $0.append(value) } }
    }
    // The first holds the only slot, the second waits (the bound of 1), the third is refused.
    let holder = Work(async: { () async -> Int in
      _ = await hold.waitOpen()
      return 0
    })
    #expect(job.tryTrackAndQueue(resultOf: holder, completion: record))
    #expect(job.tryTrackAndQueue(resultOf: Work { 1 }, completion: record))
    let refused = Work { 2 }
    #expect(!job.tryTrackAndQueue(resultOf: refused, completion: record))
    hold.open()
    job.release.open()
    try await job.run()
    #expect(results.value.sorted() == [0, 1])
    #expect(!refused.isExecuting && !refused.isFinished)
  }
}
