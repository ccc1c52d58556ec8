import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// An unhandled pipeline failure is reported: BlockSequence's default error block
/// (`MKHBlockSequence` `init`: with no error block set, a failing sequence logs
/// "Sequence named >> NAME << error: ERROR"; `setDefaultErrorHandler:` replaces it), as exercised
/// by its spec's failing-step case with no `errorHandler:`.
@Suite("Pipeline: unhandled failures are reported (BlockSequence default error block)", .timeLimit(.minutes(1)))
struct PipelineUnhandledErrorTests {
  /// Collects the misuse reports about one pipeline, and opens `reported` at the first.
  final class Reports: @unchecked Sendable {
    // @unchecked Sendable: `errors` is a thread-safe box; the latch is thread-safe.
    let errors = Locked<[JobKitError]>([])
    let reported = Latch()

    func watch(_ operation: Operation) {
      JobKitDiagnostics.setMisuseHandler(
        { [self] error, _ in
          errors.mutate { $0.append(error) }
          reported.open()
        }, for: operation)
    }
  }

  @Test func aFailureNothingHandlesIsReportedWithTheSequenceNameMessage() async throws {
    let pipeline = Pipeline.start { () -> Int in throw TestError(7) }.then { $0 + 1 }
    pipeline.name = "MyTestSequence"
    let reports = Reports()
    reports.watch(pipeline)
    pipeline.finally { _ in Issue.record("finally after a failure") }
    #expect(await reports.reported.waitOpen(timeout: 30))
    let errors = reports.errors.value
    #expect(errors == [JobKitError(.unhandledPipelineError)])
    #expect(errors.first?.message.hasPrefix("Pipeline named >> MyTestSequence << error: ") == true)
    #expect(errors.first?.message.contains("TestError(id: 7)") == true)
    #expect(pipeline.finishes(within: 30))
    #expect(pipeline.misuses == [JobKitError(.unhandledPipelineError)])
    #expect(pipeline.error as? TestError == TestError(7))
  }

  @Test func aFailureOfAPipelineAddedToAQueueByHandIsReported() async throws {
    let pipeline = Pipeline.start { () -> Int in throw TestError(8) }
    let reports = Reports()
    reports.watch(pipeline)
    OperationQueue().addOperation(pipeline)
    #expect(await reports.reported.waitOpen(timeout: 30))
    #expect(reports.errors.value == [JobKitError(.unhandledPipelineError)])
  }

  enum Handling: String, CaseIterable, Sendable {
    case onError, run, finallyThenRun, runAndWait, trackedByAGroup, waitForFinishWhileRunning
  }

  /// Each way a failure counts as handled; none is reported.
  @Test(arguments: Handling.allCases)
  func aHandledFailureIsNotReported(_ handling: Handling) async throws {
    let gate = PipelineGate()
    let step = Pipeline.start { () -> Int in
      await gate.wait()
      throw TestError(9)
    }
    let pipeline = handling == .onError ? step.onError { _ in } : step
    let reports = Reports()
    reports.watch(pipeline)
    switch handling {
    case .onError:
      pipeline.finally { _ in }
      gate.open()
      #expect(pipeline.finishes(within: 30))
    case .run:
      gate.open()  // the step cannot start before run() submitted (and marked) the pipeline
      await #expect(throws: TestError.self) { try await pipeline.run() }
    case .finallyThenRun:
      pipeline.finally { _ in }
      let running = Task { try await pipeline.run() }
      #expect(await eventually { pipeline.isObservedToFinish })  // run() was called
      gate.open()
      await #expect(throws: TestError.self) { try await running.value }
    case .runAndWait:
      gate.open()
      let threw = await onThread { (try? pipeline.runAndWait()) == nil }
      #expect(threw)
    case .trackedByAGroup:
      let group = ConcurrentGroup([pipeline])
      gate.open()
      await #expect(throws: JobFailures.self) { try await group.run() }
    case .waitForFinishWhileRunning:
      pipeline.finally { _ in }
      let waiting = Task { try await pipeline.waitForFinish() }
      #expect(await eventually { pipeline.isObservedToFinish })
      gate.open()
      await #expect(throws: TestError.self) { try await waiting.value }
    }
    #expect(pipeline.error as? TestError == TestError(9))
    #expect(pipeline.misuses.isEmpty)
    #expect(reports.errors.value.isEmpty)
  }

  @Test func aCancelIsNotAFailureAndIsNotReported() async throws {
    let started = PipelineGate()
    let pipeline = Pipeline.start { () -> Int in
      started.open()
      await suspendUntilTaskCancelled()
      throw CancellationError()
    }
    let reports = Reports()
    reports.watch(pipeline)
    pipeline.finally { _ in }
    await started.wait()
    pipeline.cancel()
    #expect(pipeline.finishes(within: 30))
    #expect(pipeline.misuses.isEmpty)
    #expect(reports.errors.value.isEmpty)
  }

  /// BlockSequence's `setDefaultErrorHandler:`: a replaced default handler gets the failure (and
  /// the pipeline) instead of the diagnostics channel.
  @Test func theDefaultHandlerCanBeReplaced() async throws {
    let pipeline = Pipeline.start { () -> String in throw TestError(10) }
    pipeline.name = "custom"
    let received = Locked<[String]>([])
    let called = Latch()
    let previous = JobKitDiagnostics.unhandledPipelineErrorHandler
    JobKitDiagnostics.unhandledPipelineErrorHandler = { [pipeline] error, failed in
      guard failed === pipeline else { return previous(error, failed) }  // other tests' pipelines
      received.mutate { $0.append("\(failed.name ?? "") \(error)") }
      called.open()
    }
    defer { JobKitDiagnostics.unhandledPipelineErrorHandler = previous }
    pipeline.finally { _ in }
    #expect(await called.waitOpen(timeout: 30))
    #expect(pipeline.finishes(within: 30))
    #expect(received.value.count == 1)
    #expect(received.value.first?.hasPrefix("custom ") == true)
    #expect(pipeline.misuses.isEmpty)  // the default was replaced: nothing reported
  }

  /// The state machine, synchronously: `run()` (and `runAndWait()`) mark the outcome awaited,
  /// also on a pipeline `finally` already submitted; `finally` alone does not.
  @Test func runMarksTheOutcomeAwaitedEvenAfterFinallySubmitted() {
    var state = PipelineState<Int>(plan: .steps({ _ in 1 }), errorHandler: nil)
    #expect(!state.outcomeAwaited)
    let submitted = state.submit(finally: PipelineHandler(queue: nil, body: { _ in }))
    #expect(submitted)
    #expect(!state.outcomeAwaited)
    let submittedAgain = state.submitForRun()
    #expect(!submittedAgain)  // already submitted: run() only awaits it
    #expect(state.outcomeAwaited)

    var fresh = PipelineState<Int>(plan: .steps({ _ in 1 }), errorHandler: nil)
    let submittedByRun = fresh.submitForRun()
    #expect(submittedByRun)
    #expect(fresh.outcomeAwaited)
  }
}
