import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// An event for the command map case.
struct RunPing: Sendable {}

/// Every runnable JobKit type, made so that running it records "ran" once; `gate`, if given, holds
/// its work back until it opens.
enum Runnable: String, CaseIterable, Sendable {
  case blockTask, work, pipeline, sequentialGroup, concurrentGroup, commandDispatch, job

  func make(_ log: EventLog, gate: Latch? = nil) -> ConcurrentOperation {
    let body: @Sendable () async -> Void = {
      if let gate { _ = await gate.waitOpen() }
      log.record("ran")
    }
    switch self {
    case .blockTask: return BlockTask(async: { await body() })
    case .work: return Work(async: { await body() })
    case .pipeline: return Pipeline.start { await body() }.then { 1 }
    case .sequentialGroup: return SequentialGroup([BlockTask(async: { await body() })])
    case .concurrentGroup: return ConcurrentGroup([BlockTask(async: { await body() })])
    case .commandDispatch:
      let map = CommandMap()
      map.map(RunPing.self, to: { _ in BlockTask(async: { await body() }) })
      return map.dispatch(RunPing())
    case .job: return ClosureJob { job in job.trackAndQueue(BlockTask(async: { await body() })) }
    }
  }

  /// The type's own `run()`.
  func run(_ operation: ConcurrentOperation) async throws {
    switch operation {
    case let job as JobController: try await job.run()
    case let task as BlockTask: try await task.run()
    case let work as Work<Void>: try await work.run()
    case let pipeline as Pipeline<Int>: #expect(try await pipeline.run() == 1)
    default: Issue.record("no run() for \(type(of: operation))")
    }
  }
}

@Suite("run() and runAndWait()", .timeLimit(.minutes(1)))
struct RunContractTests {
  @Test(arguments: Runnable.allCases)
  func runSubmitsOnceAndAwaitsTheEnd(kind: Runnable) async throws {
    let log = EventLog()
    let operation = kind.make(log)
    try await kind.run(operation)
    #expect(operation.isFinished && log.all == ["ran"] && operation.misuses.isEmpty)
    try await kind.run(operation)  // finished: returns at once, submits nothing
    #expect(log.all == ["ran"] && operation.misuses.isEmpty)
  }

  @Test(arguments: Runnable.allCases)
  func runAndWaitBlocksUntilTheEnd(kind: Runnable) async {
    let log = EventLog()
    let operation = kind.make(log)
    let finished = await onThread { () -> Bool in
      (try? operation.runAndWait()) != nil && operation.isFinished
    }
    #expect(finished && log.all == ["ran"] && operation.misuses.isEmpty)
  }

  /// A job queues the operation (it waits for its group's only slot), then `run()` is called: the
  /// operation is awaited, not added to a second queue (a fatal error in Foundation).
  @Test(arguments: [Runnable.blockTask, .work, .pipeline, .sequentialGroup, .concurrentGroup])
  func runOnAnOperationAJobQueuedDoesNotQueueItAgain(kind: Runnable) async throws {
    let log = EventLog()
    let release = Latch()
    let tracked = Latch()
    let blocker = kind.make(log, gate: release)
    let target = kind.make(log)
    let job = ClosureJob { job in
      job.setMaxConcurrentTasks(1, forGroup: type(of: target))
      job.trackAndQueue(blocker)
      job.trackAndQueue(target)
      tracked.open()
    }
    job.startJob()
    #expect(await tracked.waitOpen())
    #expect(!target.isExecuting && !target.isFinished)
    target.queueOnce()  // run()'s first half: must not queue it
    let running = Task { try await kind.run(target) }
    release.open()
    try await running.value
    try await job.run()
    #expect(log.all == ["ran", "ran"])
    #expect(job.misuses.isEmpty && target.misuses.isEmpty && job.failures.isEmpty)
  }

  /// A job's `trackAndQueue` after `run()` queued the operation tracks it without queueing it.
  @Test func trackAndQueueAfterRunTracksWithoutQueueingAgain() async throws {
    let release = Latch()
    let work = Work<Int>(async: {
      _ = await release.waitOpen()
      return 5
    })
    work.queueOnce()  // run()'s first half: queues it
    let running = Task { try await work.run() }
    let results = Locked<[Int]>([])
    let tracked = Latch()
    let job = ClosureJob { job in
      job.trackAndQueue(resultOf: work) { result in
        results.mutate { $0.append((try? result.get()) ?? -1) }
      }
      tracked.open()
    }
    QuietMisuse.silence(job)
    let jobRun = Task { try await job.run() }
    #expect(await tracked.waitOpen())
    release.open()
    #expect(try await running.value == 5)
    try await jobRun.value
    #expect(results.value == [5])
    #expect(job.misuses == [JobKitError(.taskAlreadyQueued)])
  }

  /// `finally` returns the started pipeline, so a script awaits it in the same expression.
  @Test func finallyReturnsTheStartedPipeline() async throws {
    let seen = Locked<[Int]>([])
    try await Pipeline.start { 20 }.then { $0 + 1 }.finally { value in seen.mutate { $0.append(value) } }
      .waitForFinish()
    #expect(seen.value == [21])
  }
}
