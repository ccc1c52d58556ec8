import Foundation

/// Records a job's ``JobController/events``, and those of the jobs it nests, and draws them: as
/// Chrome trace-event JSON (``traceEventJSON()``, opened by Perfetto and `chrome://tracing`) or as
/// one self-contained HTML page with an SVG timeline (``html(title:)``).
///
/// Record before starting the job, wait for the recording, then write it:
///
/// ```swift
/// let timeline = JobTimeline()
/// timeline.record(job)
/// try await job.run()
/// await timeline.waitUntilRecorded()
/// try timeline.html(title: "find-duplicates").write(toFile: "run.html", atomically: true, encoding: .utf8)
/// try timeline.traceEventJSON().write(to: URL(fileURLWithPath: "run.json"))
/// ```
///
/// Recording costs a job what listening to its events costs; a job that is not recorded pays
/// nothing. The timeline keeps every event until it is released. What is drawn (a track per job,
/// a lane per concurrent task, failures and cancels marked) and where times come from:
/// <doc:RecordingATimeline>.
public final class JobTimeline: Sendable, JobTreeFollowing {
  let recording = LockedBox(TimelineRecording())

  /// Creates an empty timeline.
  public init() {}

  /// Starts recording `job`'s events, and those of every job it tracks from now on. Call it
  /// before starting the job to see the job whole; events before this call are not seen.
  ///
  /// Several jobs may be recorded on one timeline: each is a track of its own.
  public func record(_ job: JobController) {
    follow(job, parent: nil)
  }

  /// Waits until every recorded job finished and its events were recorded. Returns at once if
  /// nothing is being recorded. A recorded job that never finishes keeps it waiting.
  public func waitUntilRecorded() async {
    await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
      if !recording.withLock({ $0.wait(waiter) }) {
        waiter.resume()
      }
    }
  }

  /// The recording as Chrome trace-event JSON (the "JSON Object Format": `traceEvents`), which
  /// Perfetto (ui.perfetto.dev) and `chrome://tracing` open.
  ///
  /// Each job is a process (`pid`) named after the job, nested jobs after their parents; its
  /// thread 0 holds the job's own slice and instant events for `groupFinished`,
  /// `allTasksFinished` and `timeLimitReached` (when its time limit ran out, with the limit's
  /// error in `args`), and threads 1, 2, … are its lanes, holding one complete (`"ph": "X"`)
  /// slice per task, named by the task, with the group as its category and in `args`, and
  /// `args.outcome` (`succeeded`, `failed` with `args.error`, or `cancelled`). Timestamps are in
  /// microseconds from the first recorded event. Call it after ``waitUntilRecorded()`` for a
  /// complete trace; before, it holds what was recorded so far.
  public func traceEventJSON() -> Data {
    Data(TraceEventWriter.json(for: layout()).utf8)
  }

  /// The recording as one HTML page: an SVG timeline with a row per lane of each job (nested
  /// jobs below their parents), a colour per group, failed tasks outlined in red and cancelled
  /// ones hatched, a red mark where a job's time limit ran out, a legend, a time axis and a tooltip (`<title>`) on every slice. It needs no
  /// network and no script. Call it after ``waitUntilRecorded()`` for a complete picture.
  ///
  /// - Parameter title: the page's heading; the first job's name if `nil`.
  public func html(title: String? = nil) -> String {
    TimelineHTMLWriter.html(for: layout(), title: title)
  }

  func timeLimitReached(job: Int, at: ContinuousClock.Instant) {
    recording.withLock { $0.timeLimitReached(job: job, at: at) }
  }

  /// The recorded jobs, laid out for drawing.
  func layout() -> TimelineLayout {
    TimelineLayout(recording.withLock { $0.jobs })
  }

  /// Subscribes to `job`'s events (with a follower of its nested jobs) and records them in a task
  /// of their own until the stream ends.
  func follow(_ job: JobController, parent: Int?) {
    // `name` may be a user's override: read it here, with no lock held.
    let type = String(describing: Swift.type(of: job))
    let name = job.name ?? type
    let id = recording.withLock { $0.addJob(name: name, type: type, parent: parent) }
    let events = job.events(following: NestedJobs(of: id, in: self))
    Task { [weak job, recording] in
      for await event in events {
        let recorded = Self.recorded(event, cancelled: { job?.isCancelled == true })
        recording.withLock { $0.record(recorded, job: id) }
      }
      let waiters = recording.withLock { $0.streamEnded(job: id) }
      for waiter in waiters {
        waiter.resume()
      }
    }
  }

  /// `event` as the recording keeps it. Runs with no lock held: describing an error and asking
  /// a job whether it was cancelled may run a user's code.
  static func recorded(_ event: JobEvent, cancelled: () -> Bool) -> TimelineRecording.Event {
    switch event {
    case .started(let at):
      return .started(at: at)
    case .taskTracked(let task, let group, let at):
      return .taskTracked(task: task, group: group, at: at)
    case .taskStarted(let task, let group, let at):
      return .taskStarted(task: task, group: group, at: at)
    case .taskFinished(let task, let group, let duration, let error, let at):
      return .taskFinished(task: task, group: group, duration: duration, outcome: outcome(of: error), at: at)
    case .groupFinished(let group, let at):
      return .groupFinished(group: group, at: at)
    case .allTasksFinished(let at):
      return .allTasksFinished(at: at)
    case .finished(let error, let at):
      // A job cancelled plainly finishes without an error; one cancelled with a reason carries
      // it, and ends marked as its tasks stopped with that reason do.
      let outcome = error == nil && cancelled() ? .cancelled : outcome(of: error)
      return .finished(outcome: outcome, at: at)
    }
  }

  static func outcome(of error: (any Error)?) -> TimelineRecording.Outcome {
    guard let error else { return .succeeded }
    if error is CancellationError { return .cancelled }
    return .failed(String(describing: error))
  }
}
