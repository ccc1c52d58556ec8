/// Follows the nested jobs of a job whose ``JobController/events`` it listens to (a timeline
/// does, to record them as nested tracks).
///
/// Registered with `JobController.events(following:)` together with a listener, and dropped with
/// it. While it is registered, the job tells it of each `JobController` it tracks, with no lock
/// held, after the nested job's `taskTracked` event was recorded and before the job queues it, so
/// a follower that subscribes to the nested job's events there sees them from its start. Only
/// jobs that listen to their events pay for it: the check runs on the path that records
/// `taskTracked`.
protocol NestedJobFollower: AnyObject, Sendable {
  /// `parent` tracked `nested`. Called on the thread that tracked it; must not block.
  func follow(_ nested: JobController, trackedBy parent: JobController)

  /// The followed job's `timeLimit` ran out at `at`: the job fails with `timeLimitExceeded`
  /// right after this returns. Called on the thread of the clock's timer, with no lock held;
  /// must not block.
  func timeLimitReached(at: ContinuousClock.Instant)
}
