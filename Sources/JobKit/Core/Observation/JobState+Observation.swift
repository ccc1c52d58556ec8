import Foundation

/// Event listeners and the `Progress` object: installed under the lock, used after it.
extension JobState {
  /// Adds an events listener, with a follower of the job's nested jobs if any. Returns `nil` if
  /// the job already finished.
  mutating func addListener(
    _ continuation: AsyncStream<JobEvent>.Continuation, follower: (any NestedJobFollower)? = nil
  ) -> UInt64? {
    guard !phase.isFinished else { return nil }
    return listeners.add(continuation, follower: follower)
  }

  /// Installs `created` as the job's progress unless one exists. Returns the one in use; a new
  /// one is published by the outbox's drainer.
  mutating func installProgress(_ created: Progress) -> Progress {
    let (installed, publish) = progress.install(created, unrouted: registry.nodes.compactMap(\.task))
    if publish { outbox.progressDidChange() }
    return installed
  }
}
