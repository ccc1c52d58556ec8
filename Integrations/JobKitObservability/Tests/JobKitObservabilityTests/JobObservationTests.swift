import InMemoryLogging
import InMemoryTracing
import JobKit
import JobKitObservability
import JobKitTesting
import Logging
import MetricsTestKit
import Testing
import Tracing

struct Broken: Error, CustomStringConvertible {
  var description: String { "broken on purpose" }
}

/// Two block tasks, a failing `Work`, and a sequential group holding a block task and a
/// concurrent group of one block task: three jobs, seven tasks, one failure.
final class SampleJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: no mutable state.
  override func main() {
    trackAndQueue(BlockTask {})
    trackAndQueue(BlockTask {})
    trackAndQueue(Work<Void> { throw Broken() })
    trackAndQueue(SequentialGroup([BlockTask {}, ConcurrentGroup([BlockTask {}])]))
  }
}

let workGroup = String(describing: Work<Void>.self)

/// Runs `observe` on a new sample job, then the job, and waits (at most 30 s) until the
/// observation handed on every event.
func runObserved(_ observe: (SampleJob) -> JobObservation) async throws {
  let job = SampleJob()
  let observation = observe(job)
  try await job.run()
  let done = Latch()
  Task {
    await observation.finished()
    done.open()
  }
  #expect(await done.waitOpen(timeout: 30), "the observation ends with the job")
}

@Suite("JobKitObservability")
struct JobObservationTests {
  @Test func logsEveryJobAndFailureWithItsMetadata() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "test", factory: { _ in handler })
    logger.logLevel = .trace
    try await runObserved { $0.logEvents(to: logger) }
    let entries = handler.entries
    let messages = entries.map { "\($0.message)" }
    #expect(messages.filter { $0 == "job started" }.count == 3)
    #expect(messages.filter { $0 == "job finished" }.count == 3)
    #expect(messages.filter { $0 == "task finished" }.count == 6)
    #expect(messages.filter { $0 == "task tracked" }.count == 7)
    let failed = try #require(entries.first { "\($0.message)" == "task failed" })
    #expect(failed.level == .warning)
    #expect(failed.metadata["jobkit.error"] == "broken on purpose")
    #expect(failed.metadata["jobkit.group"] == "\(workGroup)")
    #expect(failed.metadata["jobkit.job"] == "SampleJob")
    #expect(failed.metadata["jobkit.duration_ms"] != nil)
    // Nested jobs say whose they are.
    let starts = entries.filter { "\($0.message)" == "job started" }
    #expect(
      Set(starts.map { "\($0.metadata["jobkit.job"] ?? "")" }) == ["SampleJob", "SequentialGroup", "ConcurrentGroup"])
    #expect(starts.filter { $0.metadata["jobkit.parent_job_id"] != nil }.count == 2)
    for start in starts where start.metadata["jobkit.job"] == "SequentialGroup" {
      #expect(start.metadata["jobkit.parent_job_id"] == "0")
    }
  }

  @Test func countsAndTimesTasksPerGroupAndJobs() async throws {
    let metrics = TestMetrics()
    try await runObserved { $0.recordMetrics(factory: metrics) }
    let succeeded = { (group: String) in
      metrics.counterTotal(label: "jobkit_tasks_total", dimensions: [("group", group), ("outcome", "succeeded")])
    }
    #expect(succeeded("BlockTask") == 4)
    #expect(succeeded("SequentialGroup") == 1)
    #expect(succeeded("ConcurrentGroup") == 1)
    #expect(
      metrics.counterTotal(label: "jobkit_tasks_total", dimensions: [("group", workGroup), ("outcome", "failed")]) == 1)
    let blockTimes = try metrics.expectTimer("jobkit_task_duration", [("group", "BlockTask")])
    #expect(blockTimes.values.count == 4)
    #expect(blockTimes.values.allSatisfy { $0 >= 0 })
    for job in ["SampleJob", "SequentialGroup", "ConcurrentGroup"] {
      #expect(
        metrics.counterTotal(label: "jobkit_jobs_total", dimensions: [("job", job), ("outcome", "succeeded")]) == 1)
      #expect(try metrics.expectTimer("jobkit_job_duration", [("job", job)]).values.count == 1)
    }
  }

  @Test func makesASpanPerJobAndTaskWithNestedJobsUnderTheirParents() async throws {
    let tracer = InMemoryTracer()
    try await runObserved { $0.traceEvents(with: tracer) }
    let spans = tracer.finishedSpans
    #expect(spans.count == 10)
    let jobs = spans.filter { $0.attributes["jobkit.job.type"] != nil }
    let root = try #require(jobs.first { $0.operationName == "SampleJob" })
    let sequential = try #require(jobs.first { $0.operationName == "SequentialGroup" })
    let concurrent = try #require(jobs.first { $0.operationName == "ConcurrentGroup" })
    #expect(root.parentSpanID == nil)
    #expect(sequential.parentSpanID == root.spanID)
    #expect(concurrent.parentSpanID == sequential.spanID)
    #expect(Set(spans.map(\.traceID)).count == 1)

    let tasks = spans.filter { $0.attributes["jobkit.group"] != nil }
    #expect(tasks.count == 7)
    #expect(tasks.filter { $0.parentSpanID == root.spanID }.count == 4)
    #expect(tasks.filter { $0.parentSpanID == sequential.spanID }.count == 2)
    #expect(tasks.filter { $0.parentSpanID == concurrent.spanID }.count == 1)
    let failed = try #require(tasks.first { $0.errors.count == 1 })
    #expect(failed.status?.code == .error)
    #expect(failed.errors.first?.error is Broken)
    for span in spans {
      #expect(span.startInstant.nanosecondsSinceEpoch <= span.endInstant.nanosecondsSinceEpoch)
    }
    // Each task lies within its job's span.
    for task in tasks {
      let job = try #require(jobs.first { $0.spanID == task.parentSpanID })
      #expect(task.startInstant.nanosecondsSinceEpoch >= job.startInstant.nanosecondsSinceEpoch)
      #expect(task.endInstant.nanosecondsSinceEpoch <= job.endInstant.nanosecondsSinceEpoch)
    }
  }
}

/// A job whose time limit runs out on a `ManualClock` while it runs a task and a nested group.
final class LimitedJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let task = TestTask("task")
  let deep = TestTask("deep")
  override func main() {
    trackAndQueue(task)
    trackAndQueue(SequentialGroup([deep]))
  }
}

@Suite("JobKitObservability: cancellation reasons")
struct ReasonTracingTests {
  /// A task the job's time limit stopped records the limit's error on its span, with the status
  /// `error`, in the job and in the nested group alike; the job's span and the nested group's
  /// own span record it too.
  @Test func aTaskStoppedByATimeLimitRecordsTheReasonOnItsSpan() async throws {
    let tracer = InMemoryTracer()
    let clock = ManualClock()
    let job = LimitedJob()
    job.clock = clock
    job.timeLimit = .seconds(1)
    let observation = job.traceEvents(with: tracer)
    job.startJob()
    #expect(await job.deep.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(1))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await job.run() }
    let done = Latch()
    Task {
      await observation.finished()
      done.open()
    }
    #expect(await done.waitOpen(timeout: 30), "the observation ends with the job")

    let spans = tracer.finishedSpans
    let tasks = spans.filter { $0.attributes["jobkit.group"] != nil }
    #expect(Set(tasks.map(\.operationName)) == ["task", "deep", "SequentialGroup"])
    for span in tasks {
      #expect(span.status?.code == .error, "\(span.operationName)")
      #expect(
        span.errors.map { $0.error as? JobKitError } == [JobKitError(.timeLimitExceeded)], "\(span.operationName)")
    }
    let root = try #require(spans.first { $0.operationName == "LimitedJob" })
    #expect(root.errors.map { $0.error as? JobKitError } == [JobKitError(.timeLimitExceeded)])
    // The nested group's own span (a job's) records the reason it was stopped with.
    let nested = try #require(
      spans.first { $0.attributes["jobkit.job.type"] != nil && $0.operationName != "LimitedJob" })
    #expect(nested.status?.code == .error)
    #expect(nested.errors.map { $0.error as? JobKitError } == [JobKitError(.timeLimitExceeded)])
  }
}
