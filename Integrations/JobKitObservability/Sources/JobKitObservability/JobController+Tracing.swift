import JobKit
import Tracing

extension JobController {
  /// Makes a span for this job, for each job it tracks (a child of its parent job's span) and for
  /// each of their tasks (a child of its job's span), with swift-distributed-tracing, as the
  /// job runs. Call it before starting the job.
  ///
  /// Spans carry the times of the events: a job's span runs from its `started` to its `finished`
  /// event, a task's span lasts its `duration` and ends at its `taskFinished` event. A failed
  /// task or job records its error and gets the status `error`; so does a task stopped with a
  /// reason (`cancel(reason:)`, its job's fail or time limit: the `taskFinished` event's error
  /// is its `cancellationReason`). Attributes: `jobkit.job.type`
  /// on job spans, `jobkit.group` on task spans.
  ///
  /// - Parameters:
  ///   - tracer: where the spans go, for example `InstrumentationSystem.tracer`.
  ///   - context: the parent of the job's span; the task-local context by default.
  @discardableResult
  public func traceEvents(
    with tracer: some Tracer, context: InstrumentationContext = .current ?? .topLevel
  ) -> JobObservation {
    let spans = JobSpans(tracer: tracer, context: context)
    return JobObservation(self, handle: { spans.record($0) }, finish: { spans.finish() })
  }
}

/// The open spans of one `traceEvents` call. Only its observation's task touches it, one event at
/// a time.
final class JobSpans<T: Tracer>: @unchecked Sendable {
  // @unchecked Sendable: only used by one JobObservation's consumer task, sequentially.
  let tracer: T
  let context: InstrumentationContext
  /// Where `ContinuousClock` instants are in the tracer's wall-clock time.
  private let wallClockOffset: (wall: UInt64, continuous: ContinuousClock.Instant)
  /// The spans of jobs that have not finished.
  private var jobSpans: [Int: T.Span] = [:]
  /// The context of every job's span, kept after the span ended: each job's events come in
  /// order, but different jobs' interleave in any order, so a nested job's events may come after
  /// its parent's `finished`.
  private var jobContexts: [Int: InstrumentationContext] = [:]
  /// Events of nested jobs that came before their parent's `started`: replayed once it came.
  private var waiting: [Int: [JobTreeEvent]] = [:]

  init(tracer: T, context: InstrumentationContext) {
    self.tracer = tracer
    self.context = context
    wallClockOffset = (DefaultTracerClock.now.nanosecondsSinceEpoch, ContinuousClock.now)
  }

  func instant(_ at: ContinuousClock.Instant) -> DefaultTracerClock.Instant {
    let elapsed = wallClockOffset.continuous - at
    let nanoseconds =
      elapsed >= .zero
      ? Int64(wallClockOffset.wall) - elapsed.nanoseconds
      : Int64(wallClockOffset.wall) + (at - wallClockOffset.continuous).nanoseconds
    return DefaultTracerClock.Instant(nanosecondsSinceEpoch: UInt64(max(0, nanoseconds)))
  }

  func record(_ tree: JobTreeEvent) {
    if let parent = tree.job.parent, jobContexts[parent] == nil {
      waiting[parent, default: []].append(tree)
      return
    }
    handle(tree)
  }

  private func handle(_ tree: JobTreeEvent) {
    let job = tree.job
    switch tree.event {
    case .started(let at):
      let parentContext = job.parent.flatMap { jobContexts[$0] } ?? context
      let span = tracer.startSpan(job.label, context: parentContext, ofKind: .internal, at: instant(at))
      span.attributes["jobkit.job.type"] = job.type
      jobSpans[job.id] = span
      jobContexts[job.id] = span.context
      for event in waiting.removeValue(forKey: job.id) ?? [] {
        record(event)
      }
    case .taskFinished(let task, let group, let duration, let error, let at):
      let parentContext = jobContexts[job.id] ?? context
      let span = tracer.startSpan(task, context: parentContext, ofKind: .internal, at: instant(at - duration))
      span.attributes["jobkit.group"] = group
      if let error {
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error))
      }
      span.end(at: instant(at))
    case .finished(let error, let at):
      guard let span = jobSpans.removeValue(forKey: job.id) else { return }
      if let error {
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error))
      }
      span.end(at: instant(at))
    case .taskTracked, .taskStarted, .groupFinished, .allTasksFinished:
      break
    }
  }

  /// Every job finished: what still waits for a parent that was never seen starting (a job
  /// recorded after it started) goes under the base context.
  func finish() {
    while let (parent, events) = waiting.first {
      waiting[parent] = nil
      jobContexts[parent] = context
      for event in events {
        record(event)
      }
    }
  }
}
