/// What `debugDescription` shows, copied out under the lock.
extension JobState {
  struct DebugSummary {
    struct Group {
      let name: String
      let unfinished: Int
      let limit: Int?
      let running: Int
      let waiting: Int
    }
    let phase: String
    let unfinished: Int
    let groups: [Group]
    let failures: [TaskFailure]
    let tracked: Int64
    let routed: Int64
  }

  /// `queued`: whether a queue holds the job (its operation's queue claim).
  func debugSummary(queued: Bool) -> DebugSummary {
    let groupSummaries = registry.groups.values
      .filter { $0.unfinished > 0 || $0.limit != nil }
      .map {
        DebugSummary.Group(
          name: $0.name, unfinished: $0.unfinished, limit: $0.limit, running: $0.running,
          waiting: admission.waitingForSlot(of: $0))
      }
      .sorted { $0.name < $1.name }
    return DebugSummary(
      phase: phase.summary(queued: queued), unfinished: registry.count, groups: groupSummaries, failures: failures,
      tracked: progress.total, routed: progress.completed)
  }
}
