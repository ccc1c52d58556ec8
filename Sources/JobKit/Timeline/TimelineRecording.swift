/// What a ``JobTimeline`` recorded: every followed job and its events, plus who waits for the
/// recording to end. The timeline keeps it in one lock box; each transition only stores or
/// hands out state (the continuations of waiters are resumed by the caller, after the lock).
struct TimelineRecording {
  /// An event as the timeline keeps it: a ``JobEvent`` whose error became text (read from the
  /// error with no lock held), so that no user value lives in the recording.
  enum Event: Equatable, Sendable {
    case started(at: ContinuousClock.Instant)
    case taskTracked(task: String, group: String, at: ContinuousClock.Instant)
    case taskStarted(task: String, group: String, at: ContinuousClock.Instant)
    case taskFinished(task: String, group: String, duration: Duration, outcome: Outcome, at: ContinuousClock.Instant)
    case groupFinished(group: String, at: ContinuousClock.Instant)
    case allTasksFinished(at: ContinuousClock.Instant)
    case finished(outcome: Outcome, at: ContinuousClock.Instant)

    /// When the event happened.
    var at: ContinuousClock.Instant {
      switch self {
      case .started(let at), .taskTracked(_, _, let at), .taskStarted(_, _, let at),
        .taskFinished(_, _, _, _, let at), .groupFinished(_, let at), .allTasksFinished(let at),
        .finished(_, let at):
        return at
      }
    }
  }

  /// How a task or a job ended.
  enum Outcome: Equatable, Sendable {
    case succeeded
    /// It finished with an error (described).
    case failed(String)
    /// It was cancelled: it finished with `CancellationError`, or it is a job that was cancelled.
    case cancelled
  }

  /// One followed job: a track of the timeline.
  struct Job: Equatable, Sendable {
    /// Its position in ``jobs``; the root jobs and nested jobs share the numbering.
    let id: Int
    /// The job's `name`, or its type's name.
    let name: String
    /// The job's type name (its group in its parent's events).
    let type: String
    /// The job that tracked it, if it is a nested job.
    let parent: Int?
    var events: [Event] = []
    /// When its time limit ran out, if it did (told by the job's timer, apart from its events).
    var timeLimitReached: ContinuousClock.Instant?
    /// Its event stream ended (after `finished`, or because the job was released unfinished).
    var ended = false
  }

  private(set) var jobs: [Job] = []
  /// Jobs whose event stream has not ended.
  private var following = 0
  private var waiters: [CheckedContinuation<Void, Never>] = []

  /// Starts following a job. Returns its id.
  mutating func addJob(name: String, type: String, parent: Int?) -> Int {
    let id = jobs.count
    jobs.append(Job(id: id, name: name, type: type, parent: parent))
    following += 1
    return id
  }

  mutating func record(_ event: Event, job id: Int) {
    jobs[id].events.append(event)
  }

  mutating func timeLimitReached(job id: Int, at: ContinuousClock.Instant) {
    jobs[id].timeLimitReached = at
  }

  /// The job's stream ended. Returns the waiters to resume if no followed job is left.
  mutating func streamEnded(job id: Int) -> [CheckedContinuation<Void, Never>] {
    guard !jobs[id].ended else { return [] }
    jobs[id].ended = true
    following -= 1
    guard following == 0 else { return [] }
    defer { waiters = [] }
    return waiters
  }

  /// Somebody waits for the recording to end. Returns `false` if it already ended (the caller
  /// resumes `waiter` itself), else keeps it.
  mutating func wait(_ waiter: CheckedContinuation<Void, Never>) -> Bool {
    guard following > 0 else { return false }
    waiters.append(waiter)
    return true
  }
}
