/// Something that follows a job's events and those of each job it tracks, numbering the jobs
/// (``JobController/treeEvents``, ``JobTimeline``).
protocol JobTreeFollowing: AnyObject, Sendable {
  /// Starts following `job`, which the followed job numbered `parent` tracked (`nil`: a root).
  func follow(_ job: JobController, parent: Int?)

  /// The time limit of the followed job numbered `job` ran out at `at`.
  func timeLimitReached(job: Int, at: ContinuousClock.Instant)
}

/// The ``NestedJobFollower`` of one followed job: hands each job it tracks to the tree following
/// it, with the followed job's number as their parent.
final class NestedJobs<Tree: JobTreeFollowing>: NestedJobFollower {
  let tree: Tree
  let parent: Int

  init(of parent: Int, in tree: Tree) {
    self.tree = tree
    self.parent = parent
  }

  func follow(_ nested: JobController, trackedBy parent: JobController) {
    tree.follow(nested, parent: self.parent)
  }

  func timeLimitReached(at: ContinuousClock.Instant) {
    tree.timeLimitReached(job: parent, at: at)
  }
}
