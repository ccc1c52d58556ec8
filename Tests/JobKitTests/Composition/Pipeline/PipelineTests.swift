import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// How a test starts a pipeline and collects its outcome.
enum PipelineStarter: String, CaseIterable, Sendable {
  /// `finally(_:)` starts it; the outcome is what the handler got, or the pipeline's error.
  case finally
  /// `run()` starts and awaits it; the outcome is what it returned or threw.
  case run

  func outcome<Output: Sendable>(of pipeline: Pipeline<Output>) async -> Result<Output, any Error> {
    switch self {
    case .finally:
      let delivered = Locked<[Output]>([])
      pipeline.finally { value in delivered.mutate { $0.append(value) } }
      do {
        // The pipeline finishes only after its handler returned.
        try await pipeline.waitForFinish()
      } catch {
        #expect(delivered.value.isEmpty, "finally's handler ran for a pipeline that failed")
        return .failure(error)
      }
      #expect(delivered.value.count == 1, "finally's handler ran \(delivered.value.count) times")
      return .success(delivered.value[0])
    case .run:
      do {
        return .success(try await pipeline.run())
      } catch {
        return .failure(error)
      }
    }
  }
}

@Suite("Pipeline", .timeLimit(.minutes(1)))
struct PipelineTests {
  // MARK: - Ported from MKHBlockSequenceTests

  /// `testUsage`: steps added one at a time, then `finally` starts the sequence and gets the last
  /// step's result. (In JobKit, `then` returns the pipeline to keep building on.)
  @Test func blockSequenceUsage() async throws {
    let log = EventLog()
    let sequence = Pipeline.start { () -> String in
      log.record("Long operation")
      return "1st result"
    }
    let extended = sequence.then { object -> String in
      #expect(object == "1st result", "Incorrect previous result")
      log.record("Another Long operation")
      return "2nd result"
    }
    let lastResult = Locked<String?>(nil)
    extended.finally { object in
      lastResult.mutate { $0 = object }
      log.record("DONE")
    }
    try await extended.waitForFinish()
    #expect(lastResult.value == "2nd result")
    #expect(log.all == ["Long operation", "Another Long operation", "DONE"])
  }

  /// `testAnotherUseageExample`: the chained form with an error handler that is not called.
  @Test func blockSequenceChainedUsage() async throws {
    let log = EventLog()
    let lastResult = Locked<String?>(nil)
    let pipeline = Pipeline.start { "1st result" }
      .then { previousResult -> String in
        #expect(previousResult == "1st result")
        return "2nd result"
      }
      .onError { error in log.record("error: \(error)") }
    pipeline.finally { lastResult.mutate { [object = $0] in $0 = object } }
    try await pipeline.waitForFinish()
    #expect(lastResult.value == "2nd result")
    #expect(log.all.isEmpty)
  }

  /// MKHBlockSequence semantics: a failing step skips the remaining steps and `finally`; the
  /// error block gets the error.
  @Test func blockSequenceErrorSkipsLaterStepsAndFinally() async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { () -> String in
      log.record("1st")
      return "1st result"
    }
    .then { _ -> String in
      log.record("2nd")
      throw TestError(2)
    }
    .then { _ -> String in
      log.record("3rd")
      return "3rd result"
    }
    .onError { error in log.record("error \((error as? TestError)?.id ?? -1)") }
    pipeline.finally { _ in log.record("finally") }
    await #expect(throws: TestError(2)) { try await pipeline.waitForFinish() }
    #expect(log.all == ["1st", "2nd", "error 2"])
  }

  // MARK: - Results and errors

  @Test(arguments: PipelineStarter.allCases)
  func eachStepGetsThePreviousResultAcrossTypeChanges(starter: PipelineStarter) async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { () -> Int in
      log.record("Int")
      return 42
    }
    .then { number -> String in  // Int -> String
      log.record("String from \(number)")
      return String(number)
    }
    .then { text -> [String] in  // String -> [String]
      log.record("[String] from \(text)")
      return text.map { String($0) }
    }
    let outcome = await starter.outcome(of: pipeline)
    #expect(try outcome.get() == ["4", "2"])
    #expect(pipeline.result == ["4", "2"])
    #expect(pipeline.isFinished && pipeline.error == nil && !pipeline.isCancelled)
    #expect(log.all == ["Int", "String from 42", "[String] from 42"])
  }

  @Test(arguments: PipelineStarter.allCases)
  func theFirstErrorStopsTheChainSkipsFinallyAndCallsTheErrorHandlerOnce(starter: PipelineStarter) async throws {
    let log = EventLog()
    let handled = Locked<[TestError?]>([])
    let pipeline = Pipeline.start { () -> Int in
      log.record("step 1")
      return 1
    }
    .then { _ -> Int in
      log.record("step 2")
      throw TestError(2)
    }
    .then { _ -> Int in
      log.record("step 3")
      throw TestError(3)
    }
    .then { value -> String in
      log.record("step 4")
      return String(value)
    }
    .onError { error in handled.mutate { $0.append(error as? TestError) } }
    let outcome = await starter.outcome(of: pipeline)
    #expect(throws: TestError(2)) { try outcome.get() }
    #expect(handled.value == [TestError(2)])
    #expect(log.all == ["step 1", "step 2"])
    #expect(pipeline.error as? TestError == TestError(2))
    #expect(pipeline.result == nil && pipeline.isFinished && !pipeline.isCancelled)
  }

  @Test func theLastErrorHandlerSetBeforeTheStartIsTheOneCalled() async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { () -> Int in throw TestError(1) }
      .onError { _ in log.record("first handler") }
      .then { $0 + 1 }
      .onError { _ in log.record("second handler") }
    await #expect(throws: TestError(1)) { try await pipeline.run() }
    #expect(log.all == ["second handler"])
  }

  // MARK: - Cancel

  @Test(arguments: [false, true])
  func cancelStopsBeforeTheNextStepCancelsTheRunningStepAndRunsNoHandler(stepThrowsOnCancel: Bool) async throws {
    let log = EventLog()
    let entered = PipelineGate()
    let pipeline = Pipeline.start { () async throws -> Int in
      log.record("step 1")
      entered.open()
      await suspendUntilTaskCancelled()
      log.record("step 1 saw cancel: \(Task.isCancelled)")
      if stepThrowsOnCancel { try Task.checkCancellation() }
      return 1
    }
    .then { value -> Int in
      log.record("step 2")
      return value + 1
    }
    .onError { _ in log.record("onError") }
    pipeline.finally { _ in log.record("finally") }
    await entered.wait()
    pipeline.cancel()
    await #expect(throws: CancellationError.self) { try await pipeline.waitForFinish() }
    #expect(log.all == ["step 1", "step 1 saw cancel: true"])
    #expect(pipeline.isCancelled && pipeline.isFinished)
    #expect(pipeline.error == nil && pipeline.result == nil)
  }

  @Test func cancelBeforeTheStartRunsNoStepAndNoHandler() async throws {
    let log = EventLog()
    let pipeline = Pipeline.start { () -> Int in
      log.record("step 1")
      return 1
    }
    .onError { _ in log.record("onError") }
    pipeline.cancel()
    await #expect(throws: CancellationError.self) { try await pipeline.run() }
    #expect(log.all.isEmpty)
    #expect(pipeline.isCancelled && pipeline.isFinished && pipeline.error == nil)
  }

  @Test func cancellingTheTaskAwaitingRunCancelsThePipeline() async throws {
    let log = EventLog()
    let entered = PipelineGate()
    let pipeline = Pipeline.start { () async -> Int in
      entered.open()
      await suspendUntilTaskCancelled()
      log.record("step 1 saw cancel: \(Task.isCancelled)")
      return 1
    }
    .then { value -> Int in
      log.record("step 2")
      return value
    }
    .onError { _ in log.record("onError") }
    let runner = Task { try await pipeline.run() }
    await entered.wait()
    runner.cancel()
    await #expect(throws: CancellationError.self) { try await runner.value }
    #expect(pipeline.isCancelled && pipeline.isFinished)
    #expect(log.all == ["step 1 saw cancel: true"])
  }

  @Test func aCancelAfterTheLastStepEndedChangesNothing() async throws {
    let pipeline = Pipeline.start { 7 }
    let delivered = Locked<[Int]>([])
    pipeline.finally { value in
      delivered.mutate { $0.append(value) }
      pipeline.cancel()  // too late: the outcome was decided when the last step returned
    }
    #expect(try await pipeline.run() == 7)
    #expect(delivered.value == [7])
    #expect(pipeline.result == 7 && pipeline.error == nil && pipeline.isCancelled)
  }

  // MARK: - Threads and queues

  @Test(arguments: [false, true], [false, true])
  func handlersNeverRunOnTheMainQueue(failing: Bool, onChosenQueue: Bool) async throws {
    let handlers = PipelineMarkedQueue("JobKitTests.Pipeline.handlers")
    let contexts = Locked<[PipelineHandlerContext]>([])
    let record: @Sendable () -> Void = {
      let context = PipelineHandlerContext(isMainThread: Thread.isMainThread, isOnMarkedQueue: handlers.isCurrent)
      contexts.mutate { $0.append(context) }
    }
    let steps = Pipeline.start { () -> Int in
      if failing { throw TestError(1) }
      return 1
    }
    if onChosenQueue {
      steps.onError(on: handlers.queue) { _ in record() }.finally(on: handlers.queue) { _ in record() }
    } else {
      steps.onError { _ in record() }.finally { _ in record() }
    }
    if failing {
      await #expect(throws: TestError(1)) { try await steps.waitForFinish() }
    } else {
      try await steps.waitForFinish()
    }
    #expect(contexts.value == [PipelineHandlerContext(isMainThread: false, isOnMarkedQueue: onChosenQueue)])
  }

  @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
  @Test(arguments: [false, true])
  func stepsAndDefaultHandlersRunOnTheChosenStepQueue(failing: Bool) async throws {
    let steps = PipelineMarkedQueue("JobKitTests.Pipeline.steps")
    let log = EventLog()
    let pipeline = Pipeline.start(on: steps.queue) { () async -> Int in
      log.record("step 1 on queue: \(steps.isCurrent)")
      // A real suspension, resumed from another thread: the rest of the step still runs on the
      // step queue.
      await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume() }
      }
      log.record("step 1 after await on queue: \(steps.isCurrent)")
      return 1
    }
    .then { value -> Int in
      log.record("step 2 on queue: \(steps.isCurrent)")
      if failing { throw TestError(2) }
      return value + 1
    }
    .onError { _ in log.record("onError on queue: \(steps.isCurrent), main: \(Thread.isMainThread)") }
    pipeline.finally { _ in log.record("finally on queue: \(steps.isCurrent), main: \(Thread.isMainThread)") }
    if failing {
      await #expect(throws: TestError(2)) { try await pipeline.waitForFinish() }
    } else {
      try await pipeline.waitForFinish()
    }
    let handler = failing ? "onError" : "finally"
    #expect(
      log.all == [
        "step 1 on queue: true", "step 1 after await on queue: true", "step 2 on queue: true",
        "\(handler) on queue: true, main: false",
      ]
    )
  }

  // MARK: - A pipeline is an operation

  @Test(arguments: [false, true])
  func aJobTracksAPipelineAsATaskAndReadsItsResultInTheCompletion(failing: Bool) async throws {
    let pipeline = Pipeline.start { () -> Int in 21 }
      .then { value -> Int in
        if failing { throw TestError(7) }
        return value * 2
      }
      .then { value in [String(value)] }
    let job = PipelineResultJob(pipeline)
    if failing {
      await #expect(throws: TestError(7)) { try await job.run() }
      #expect(job.seen.value == nil)
    } else {
      try await job.run()
      #expect(job.seen.value == ["42"])
    }
    #expect(pipeline.isFinished)
  }

  @Test func aPipelineInAPlainQueueWaitsForItsDependency() async throws {
    let log = EventLog()
    let dependency = BlockOperation { log.record("dependency") }
    let pipeline = twoLoggedSteps(log)
    pipeline.addDependency(dependency)
    let queue = OperationQueue()
    queue.addOperation(pipeline)
    queue.addOperation(dependency)
    try await pipeline.waitForFinish()
    #expect(log.all == ["dependency", "step 1", "step 2"])
    #expect(pipeline.result == 2)
  }

  // MARK: - Misuse

  @Test func aSpentBuilderFailsAndSoDoesAnythingBuiltOnIt() async throws {
    let log = EventLog()
    let handled = Locked<[JobKitError?]>([])
    let first = Pipeline.start { () -> Int in
      log.record("step 1")
      return 1
    }
    .onError { error in handled.mutate { $0.append(error as? JobKitError) } }
    let second = first.then { "\($0 + 1)" }  // a new type: `first` is now a spent builder
    let builtOnSpent = first.then { $0 + 10 }
    await #expect(throws: JobKitError(.spentBuilder)) { try await builtOnSpent.run() }
    await #expect(throws: JobKitError(.spentBuilder)) { try await first.run() }
    #expect(try await second.run() == "2")
    #expect(log.all == ["step 1"])
    // The error handler travels with the steps and stays on the spent builder: each failing
    // pipeline called it once.
    #expect(handled.value == [JobKitError(.spentBuilder), JobKitError(.spentBuilder)])
    #expect(builtOnSpent.error.map { "\($0)" }?.contains("spentBuilder") == true)
  }

  @Test func thenAndOnErrorOnAStartedPipelineLeaveItUnchangedAndReturnAFailingPipeline() async throws {
    let entered = PipelineGate()
    let release = PipelineGate()
    let log = EventLog()
    let pipeline = Pipeline.start { () async -> Int in
      entered.open()
      await release.wait()
      return 1
    }
    .onError { _ in log.record("original handler") }
    let runner = Task { try await pipeline.run() }
    await entered.wait()
    let lateStep = pipeline.then { value -> Int in
      log.record("late step")
      return value + 1
    }
    let lateHandler = pipeline.onError { error in
      log.record("late handler: \((error as? JobKitError)?.code.description ?? "?")")
    }
    #expect(lateHandler !== pipeline)
    release.open()
    #expect(try await runner.value == 1)
    await #expect(throws: JobKitError(.modifiedAfterStart)) { try await lateStep.run() }
    await #expect(throws: JobKitError(.modifiedAfterStart)) { try await lateHandler.run() }
    // `lateStep` carried the original handler; `lateHandler` has the late one.
    #expect(log.all == ["original handler", "late handler: modifiedAfterStart"])
  }

  @Test func aSecondFinallyIsIgnoredAndReportedAsStartedTwice() async throws {
    let calls = EventLog()
    let pipeline = Pipeline.start { 1 }
    QuietMisuse.silence(pipeline)
    pipeline.finally { _ in calls.record("first") }
    pipeline.finally { _ in calls.record("second") }
    try await pipeline.waitForFinish()
    #expect(calls.all == ["first"])
    #expect(pipeline.misuses == [JobKitError(.startedTwice)])
  }

  // MARK: - Stress

  /// Invariant: whatever the timing of a cancel, each pipeline ends exactly one way and finishes:
  /// its `finally` handler once with the result, or its error handler once with the first error,
  /// or (only if it was cancelled) no handler at all. Pipelines that are not cancelled always
  /// end the way their failing step says.
  @Test func racingCancelsLeaveEachPipelineEndingExactlyOneWay() async throws {
    var generator = SeededGenerator(seed: 4)
    let plans = (0..<400).map { _ in
      // failAt: the step (0, 1 or 2) that throws, or 3 for none. cancel: 0 none, 1 right after
      // `finally`, 2 from another thread at some point, 3 from inside the second step.
      (failAt: Int.random(in: 0...3, using: &generator), cancel: Int.random(in: 0...3, using: &generator))
    }
    await withTaskGroup(of: Void.self) { group in
      for plan in plans {
        group.addTask { await Self.runRacing(plan) }
      }
    }
  }

  private static func runRacing(_ plan: (failAt: Int, cancel: Int)) async {
    let calls = EventLog()
    let cancelFromStep = Locked<Operation?>(nil)
    let pipeline = Pipeline.start { () async throws -> Int in
      if plan.failAt == 0 { throw TestError(0) }
      await Task.yield()
      return 0
    }
    .then { value -> Int in
      if plan.cancel == 3 { cancelFromStep.value?.cancel() }
      if plan.failAt == 1 { throw TestError(1) }
      await Task.yield()
      return value + 1
    }
    .then { value -> Int in
      if plan.failAt == 2 { throw TestError(2) }
      return value + 1
    }
    .onError { error in calls.record("error \((error as? TestError)?.id ?? -1)") }
    cancelFromStep.mutate { $0 = pipeline }
    pipeline.finally { value in calls.record("finally \(value)") }
    switch plan.cancel {
    case 1: pipeline.cancel()
    case 2: DispatchQueue.global().async { pipeline.cancel() }
    default: break
    }
    _ = try? await pipeline.waitForFinish()
    cancelFromStep.mutate { $0 = nil }
    let expected = plan.failAt == 3 ? "finally 2" : "error \(plan.failAt)"
    #expect(pipeline.isFinished)
    switch calls.all {
    case ["finally 2"]:
      #expect(expected == "finally 2" && pipeline.result == 2 && pipeline.error == nil)
    case [expected]:
      #expect(pipeline.error as? TestError == TestError(plan.failAt) && pipeline.result == nil)
    case []:
      #expect(plan.cancel != 0 && pipeline.isCancelled && pipeline.error == nil && pipeline.result == nil)
    default:
      Issue.record("pipeline \(plan) ended with handler calls \(calls.all), expected [\(expected)] or none")
    }
  }

  // MARK: - Memory

  @available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
  @Test func aFinishedPipelineItsBuilderAndWhatItCapturedAreFreed() async throws {
    let tracker = ReleaseTracker()
    let steps = PipelineMarkedQueue("JobKitTests.Pipeline.memory")
    do {
      let log = EventLog()
      let builder = Pipeline.start(on: steps.queue) { () -> Int in
        log.record("step 1")
        return 1
      }
      let pipeline = builder.then { value -> String in
        log.record("step 2")
        return String(value)
      }
      .onError { _ in log.record("onError") }
      // A handler that captures its own pipeline: the pipeline drops it when it ends.
      pipeline.finally { value in log.record("finally \(value) \(pipeline.result ?? "-")") }
      tracker.watch(builder, "builder")
      tracker.watch(pipeline, "pipeline")
      tracker.watch(log, "captured log")
      try await pipeline.waitForFinish()
      #expect(log.all == ["step 1", "step 2", "finally 1 1"])
    }
    // Freed a moment after the finish, not at once: `waitForFinish()` is resumed from inside the
    // pipeline's last work item, and the operation queue that ran the pipeline drops it on a
    // thread of its own (draining `steps` was not enough: under load the pipeline was still
    // alive then). A bounded poll, so a pipeline that is never freed still fails.
    #expect(await tracker.survivors() == [])
  }
}

/// A job whose only task is a pipeline: it keeps the pipeline's result, read in the task's
/// completion, or fails with the pipeline's error.
final class PipelineResultJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `pipeline` is immutable and `seen` is a lock-protected box.
  let pipeline: Pipeline<[String]>
  let seen = Locked<[String]?>(nil)

  init(_ pipeline: Pipeline<[String]>) {
    self.pipeline = pipeline
    super.init()
  }

  override func main() {
    trackAndQueue(pipeline) { [unowned self] pipeline in
      if let error = pipeline.error {
        fail(error)
      } else {
        seen.mutate { $0 = pipeline.result }
      }
    }
  }
}
