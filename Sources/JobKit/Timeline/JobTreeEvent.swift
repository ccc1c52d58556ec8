/// An event of a job or of a job it nests, as delivered by ``JobController/treeEvents``: the
/// ``JobEvent`` and which job it belongs to.
public struct JobTreeEvent: Sendable {
  /// A job of the tree.
  public struct Job: Sendable, Hashable {
    /// 0 for the job whose ``JobController/treeEvents`` you listen to; nested jobs are numbered
    /// 1, 2, … in the order they were tracked.
    public let id: Int
    /// The `id` of the job that tracked this one, `nil` for the job you listen to.
    public let parent: Int?
    /// The job's `name`, or its type's name.
    public let name: String
    /// The job's type name: its group in its parent's events.
    public let type: String
  }

  /// The job the event belongs to.
  public let job: Job
  /// What happened.
  public let event: JobEvent
}

extension JobController {
  /// The job's ``events`` and those of every job it tracks from now on (a nested job, a group in
  /// a group), in one sequence: each event says which job it belongs to. A nested job's events
  /// are seen from its start, since JobKit tells the sequence of the nested job before queueing
  /// it.
  ///
  /// Each job's events come in their order; events of different jobs interleave as they are
  /// delivered. The sequence ends once every job in it finished. As with ``events``, each access
  /// is a sequence of its own that gets every event (one sequence shared by several consumers
  /// splits them), subscribe before starting the job, and a job nobody listens to pays nothing.
  public var treeEvents: AsyncStream<JobTreeEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: JobTreeEvent.self)
    let tree = JobEventTree(continuation)
    tree.follow(self, parent: nil)
    return stream
  }
}

/// The jobs of one ``JobController/treeEvents`` sequence: numbers them, forwards their events,
/// and ends the sequence when the last one's stream ended.
final class JobEventTree: JobTreeFollowing {
  private struct State {
    var nextID = 0
    var following = 0
  }

  private let state = LockedBox(State())
  private let continuation: AsyncStream<JobTreeEvent>.Continuation

  init(_ continuation: AsyncStream<JobTreeEvent>.Continuation) {
    self.continuation = continuation
  }

  /// A time limit shows in the events as the job's stop: its tasks' `taskFinished` and its
  /// `finished` carry `timeLimitExceeded`.
  func timeLimitReached(job: Int, at: ContinuousClock.Instant) {}

  func follow(_ job: JobController, parent: Int?) {
    // `name` may be a user's override: read it with no lock held.
    let type = String(describing: Swift.type(of: job))
    let name = job.name ?? type
    let id = state.withLock { state -> Int in
      defer { state.nextID += 1 }
      state.following += 1
      return state.nextID
    }
    let described = JobTreeEvent.Job(id: id, parent: parent, name: name, type: type)
    let events = job.events(following: NestedJobs(of: id, in: self))
    Task { [continuation, state] in
      for await event in events {
        continuation.yield(JobTreeEvent(job: described, event: event))
      }
      if state.withLock({ state -> Bool in
        state.following -= 1
        return state.following == 0
      }) {
        continuation.finish()
      }
    }
  }
}
