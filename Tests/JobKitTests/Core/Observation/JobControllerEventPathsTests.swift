import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Events for every way a task ends (issue 23). Time only moves when a test advances the job's
/// `ManualClock`.
@Suite("JobController events: one taskFinished per tracked task")
struct JobControllerEventPathsTests {
  /// A way a tracked task's life ends.
  enum Path: String, CaseIterable, Sendable {
    case finishes, fails, cancelledWhileRunning, timesOut, failFastCancelsTheOther
    case retriedThenSucceeds, retryEndedByACancel, retryEndedByAFail
    case waitingTaskCancelledByAStop, finishedBeforeItWasTracked, trackedAfterTheCancel
  }

  /// Invariant: whatever ends a task (each path above), every task with a `taskTracked` event
  /// gets exactly one `taskFinished` event, after it; a retried task is one task (its attempts
  /// share a name here, as they usually do).
  @Test(arguments: Path.allCases)
  func everyTaskNodeGetsExactlyOneTaskFinishedEvent(path: Path) async throws {
    let clock = ManualClock()
    let tasks = Locked<[String: ManualTask]>([:])
    @Sendable func made(_ key: String, name: String? = nil, finishesOnCancel: Bool = true) -> ManualTask {
      let task = ManualTask(key, finishesOnCancel: finishesOnCancel)
      task.name = name ?? key
      tasks.mutate { $0[key] = task }
      return task
    }
    @Sendable func task(_ name: String) async -> ManualTask? {
      guard await eventually({ tasks.value[name] != nil }) else { return nil }
      return tasks.value[name]
    }
    let retry = RetryPolicy(maxAttempts: 2, initialDelay: .seconds(1), jitter: false)
    let alreadyFinished = named(InstantTask(), "done")
    alreadyFinished.start()
    let job = ScriptedJob { job in
      switch path {
      case .finishes, .fails, .cancelledWhileRunning:
        job.trackAndQueue(made("a"))
      case .timesOut:
        job.trackAndQueue(made("a"), timeout: .seconds(1))
      case .failFastCancelsTheOther:
        job.failurePolicy = .failFast
        job.trackAndQueue(made("a"))
        job.trackAndQueue(made("b"))
      case .retriedThenSucceeds, .retryEndedByACancel, .retryEndedByAFail:
        job.trackAndQueue(options: TaskOptions(retry: retry)) { attempt in made("a#\(attempt)", name: "a") }
      case .waitingTaskCancelledByAStop:
        job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
        job.trackAndQueue(made("holder", finishesOnCancel: false))
        job.trackAndQueue(made("waiting"))
      case .finishedBeforeItWasTracked:
        job.trackAndQueue(alreadyFinished)
      case .trackedAfterTheCancel:
        job.cancel()
        job.trackAndQueue(made("late"))
      }
    }
    QuietMisuse.silence(job)
    job.clock = clock
    let events = job.events
    let collected = Task { await events.reduce(into: [JobEvent]()) { $0.append($1) } }
    job.startJob()

    switch path {
    case .finishes, .fails:
      let a = try #require(await task("a"))
      #expect(await a.startedLatch.waitOpen())
      a.finish(error: path == .fails ? TestError(1) : nil)
    case .cancelledWhileRunning:
      let a = try #require(await task("a"))
      #expect(await a.startedLatch.waitOpen())
      job.cancel()
    case .timesOut:
      let a = try #require(await task("a"))
      #expect(await a.startedLatch.waitOpen())
      #expect(await clock.waitForScheduled(1))
      clock.advance(by: .seconds(1))
    case .failFastCancelsTheOther:
      let a = try #require(await task("a"))
      let b = try #require(await task("b"))
      #expect(await a.startedLatch.waitOpen())
      #expect(await b.startedLatch.waitOpen())
      a.finish(error: TestError(1))
    case .retriedThenSucceeds, .retryEndedByACancel, .retryEndedByAFail:
      let first = try #require(await task("a#1"))
      #expect(await first.startedLatch.waitOpen())
      first.finish(error: TestError(1))
      #expect(await clock.waitForScheduled(1))  // the retry delay
      switch path {
      case .retriedThenSucceeds:
        clock.advance(by: .seconds(1))
        let second = try #require(await task("a#2"))
        #expect(await second.startedLatch.waitOpen())
        second.finish()
      case .retryEndedByACancel:
        job.cancel()
      default:
        job.fail(TestError(2))
      }
    case .waitingTaskCancelledByAStop:
      let holder = try #require(await task("holder"))
      #expect(await holder.startedLatch.waitOpen())
      job.cancel()
      holder.finish()
    case .finishedBeforeItWasTracked, .trackedAfterTheCancel:
      break
    }
    _ = try? await job.run()
    let received = await collected.value
    #expect(finishEventProblems(received) == [])
    let finishedTasks = received.compactMap { event -> String? in
      if case .taskFinished(let task, _, _, _, _) = event { return task }
      return nil
    }
    #expect(Set(finishedTasks) == expectedTasks(path))
    let failedTasks = received.compactMap { event -> String? in
      if case .taskFinished(let task, _, _, _?, _) = event { return task }
      return nil
    }
    #expect(Set(failedTasks) == expectedFailures(path))
  }

  private func expectedTasks(_ path: Path) -> Set<String> {
    switch path {
    case .finishes, .fails, .cancelledWhileRunning, .timesOut: return ["a"]
    case .failFastCancelsTheOther: return ["a", "b"]
    case .retriedThenSucceeds, .retryEndedByACancel, .retryEndedByAFail: return ["a"]
    case .waitingTaskCancelledByAStop: return ["holder", "waiting"]
    case .finishedBeforeItWasTracked: return ["done"]
    case .trackedAfterTheCancel: return ["late"]
    }
  }

  /// The tasks whose `taskFinished` carries an error: a failure, or a stop's reason (the
  /// fail-fast sibling `b` carries `a`'s error as its cancellation reason).
  private func expectedFailures(_ path: Path) -> Set<String> {
    switch path {
    case .failFastCancelsTheOther: return ["a", "b"]
    case .fails, .timesOut, .retryEndedByACancel, .retryEndedByAFail: return ["a"]
    default: return []
    }
  }
}

/// What breaks "every `taskTracked` has exactly one `taskFinished` of the same task, after it"
/// in `events` (tasks named uniquely).
func finishEventProblems(_ events: [JobEvent]) -> [String] {
  var tracked: [String: Int] = [:]
  var finished: [String: Int] = [:]
  var problems: [String] = []
  for event in events {
    switch event {
    case .taskTracked(let task, _, _):
      tracked[task, default: 0] += 1
    case .taskFinished(let task, _, _, _, _):
      if tracked[task] == nil { problems.append("\(task) finished before it was tracked") }
      finished[task, default: 0] += 1
    default:
      break
    }
  }
  for (task, count) in tracked where count != 1 || finished[task] != 1 {
    problems.append("\(task): tracked \(count)×, finished \(finished[task] ?? 0)×")
  }
  for (task, count) in finished where tracked[task] == nil {
    problems.append("\(task): finished \(count)×, never tracked")
  }
  return problems
}
