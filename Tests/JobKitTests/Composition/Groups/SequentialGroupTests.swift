import Foundation
import Testing

@testable import JobKit

@Suite("SequentialGroup")
struct SequentialGroupTests {
  /// MGSequentialCommandGroupSpec "should execute commands one after the other": an asynchronous,
  /// a direct-finishing and a synchronous command run in the order added.
  @Test func runsCommandsOneAfterTheOtherInTheOrderAdded() async throws {
    let log = EventLog()
    let group = SequentialGroup([
      Step("c1", log: log, finish: .later),
      Step("c2", log: log, finish: .inline),
      BlockTask { log.record("c3") },
    ])
    try await group.run()
    #expect(log.all == ["c1", "c2", "c3"])
  }

  /// CompositeOperations cascade 1 and 15: each task starts only after the previous one finished.
  @Test(arguments: [Step.Finish.inline, .later])
  func startsEachTaskOnlyAfterThePreviousFinished(finish: Step.Finish) async throws {
    let log = EventLog()
    let violations = Locked(0)
    let group = SequentialGroup()
    var previous: Step?
    for index in 0..<50 {
      let before = previous
      let step = Step("\(index)", log: log, finish: index.isMultiple(of: 2) ? finish : .later) {
        if let before, !before.isFinished { violations.mutate { $0 += 1 } }
      }
      group.add(step)
      previous = step
    }
    try await group.run()
    #expect(violations.value == 0)
    #expect(log.all == (0..<50).map { "\($0)" })
  }

  @Test func tasksAddedWhileRunningRunAfterTheOthers() async throws {
    let log = EventLog()
    let group = SequentialGroup()
    group.add(
      Step("a", log: log) {
        group.add(Step("added by a", log: log, finish: .later))
      })
    group.add(Step("b", log: log, finish: .later))
    try await group.run()
    #expect(log.all == ["a", "b", "added by a"])
  }

  /// Gummi Commander CommandChainSpec 5 and 6: asynchronous steps keep strict order, also when
  /// sequences nest in sequences (the 0.2 s step still runs before the 0.1 s one).
  @Test func nestedSequencesOfAsyncStepsKeepStrictOrder() async throws {
    func append(_ text: String) -> BlockTask {
      BlockTask(async: { context in
        await Task.yield()
        context.update(.text, default: "") { $0 += text }
      })
    }
    func append12Async3() -> SequentialGroup {
      SequentialGroup([append("1_async"), append("2_async"), BlockTask { $0.update(.text, default: "") { $0 += "3" } }])
    }
    let single = append12Async3()
    try await single.run()
    #expect(single.context[.text] == "1_async2_async3")

    let double = SequentialGroup([append12Async3(), append("2_async"), append12Async3()])
    try await double.run()
    #expect(double.context[.text] == "1_async2_async32_async1_async2_async3")
  }

  /// Gummi Commander CommandChainSpec 7: with `stopsOnFailure`, a failed step ends the sequence;
  /// the next step never runs, and the group fails with that step's error.
  @Test func stopsOnFailureSkipsTheRestAndFailsWithTheFirstError() async throws {
    let log = EventLog()
    let noSuccess = Step("error", log: log, finish: .later, failure: TestError(1))
    let append1 = Step("1_async", log: log, finish: .later)
    let group = SequentialGroup([noSuccess, append1])
    group.stopsOnFailure = true
    #expect(group.stopsOnFailure)
    await #expect(throws: TestError(1)) { try await group.run() }
    #expect(log.all == ["error"])
    #expect(append1.isCancelled && append1.isFinished)
    #expect(group.failures.map { $0.error as? TestError } == [TestError(1)])
  }

  /// With the core's `.failFast` policy instead of `stopsOnFailure`, the group also stops at the
  /// first failure, and the tasks that never started still finish, cancelled, without running.
  @Test func failFastPolicyAlsoStopsAndTheWaitingTasksStillFinish() async throws {
    let log = EventLog()
    let rest = (0..<3).map { Step("rest \($0)", log: log) }
    let group = SequentialGroup([Step("fails", log: log, finish: .later, failure: TestError(2))] + rest)
    group.failurePolicy = .failFast
    await #expect(throws: TestError(2)) { try await group.run() }
    for task in rest {
      #expect(await task.finishedSoon())
      #expect(task.isCancelled)
    }
    #expect(log.all == ["fails"])
  }

  /// Gummi Commander's CommandChaining example: without `stopsOnFailure` the sentence is logged
  /// to its end although "pretty" fails, and the group reports that failure.
  @Test func goesOnAfterAFailureAndReportsEveryFailureInOrder() async throws {
    let log = EventLog()
    let wordSequence2 = SequentialGroup([
      Step("pretty", log: log, finish: .later, failure: TestError(5)),
      Step("good!", log: log, finish: .later),
    ])
    let wordSequence1 = SequentialGroup([
      Step("is", log: log, finish: .later),
      Step("actually", log: log, finish: .later),
      Step("working", log: log),
      wordSequence2,
    ])
    let sentence = SequentialGroup([
      Step("Log a sentence example:", log: log),
      Step("This", log: log, finish: .later),
      wordSequence1,
      Step("Done", log: log, failure: TestError(6)),
    ])
    #expect(!sentence.stopsOnFailure)
    await #expect(throws: JobFailures.self) { try await sentence.run() }
    #expect(log.all == ["Log a sentence example:", "This", "is", "actually", "working", "pretty", "good!", "Done"])
    let failures = try #require(sentence.error as? JobFailures).failures
    #expect(failures.count == 2)
    let nested = try #require(failures.first?.error as? JobFailures)
    #expect((nested.failures.first?.error as? JobFailures)?.failures.first?.error as? TestError == TestError(5))
    #expect(failures.last?.error as? TestError == TestError(6))
  }

  /// MGCommandGroupSpec "with one synchronous and one asynchronous command / should cancel
  /// execution", for a sequence: the running cancellable task stops, the next one never runs,
  /// and the group finishes once, cancelled.
  @Test func cancelStopsTheRunningTaskAndDropsTheRest() async throws {
    let log = EventLog()
    let running = ManualTask("running", finishesOnCancel: true)
    let next = Step("next", log: log)
    let group = SequentialGroup([running, next])
    let finishCount = Locked(0)
    group.completionBlock = { finishCount.mutate { $0 += 1 } }
    group.startJob()
    #expect(await running.startedLatch.opened())
    group.cancel()
    #expect(next.isCancelled)
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(running.cancelHookCalls == 1)
    #expect(next.isFinished && log.all.isEmpty)
    #expect(group.isCancelled && group.error == nil)
    #expect(await group.finishedSoon())
    // Foundation runs the completionBlock on a global queue after the finish.
    #expect(await eventually { finishCount.value == 1 })
    group.completionBlock = nil
  }

  /// MGCommand README: a command that cannot be cancelled runs to its end and is waited for.
  @Test func cancelWaitsForATaskThatCannotBeCancelled() async throws {
    let log = EventLog()
    let stubborn = ManualTask("stubborn", finishesOnCancel: false)
    let next = Step("next", log: log)
    let group = SequentialGroup([stubborn, next])
    group.startJob()
    #expect(await stubborn.startedLatch.opened())
    group.cancel()
    #expect(await stubborn.cancelledLatch.opened())
    #expect(!group.isFinished)  // the stubborn task has not finished
    stubborn.finish()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(log.all.isEmpty && next.isCancelled && next.isFinished)
  }

  /// MGCommandGroupSpec "should remove all commands when cancel before execution".
  @Test(arguments: GroupKind.allCases)
  func cancelBeforeStartRunsNothing(kind: GroupKind) async throws {
    let log = EventLog()
    let steps = (0..<3).map { Step("\($0)", log: log) }
    let group = kind.make(steps)
    group.cancel()
    #expect(steps.allSatisfy { $0.isCancelled })
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(log.all.isEmpty)
    #expect(steps.allSatisfy { $0.isFinished })
  }
}
