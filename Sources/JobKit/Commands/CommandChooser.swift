import Foundation

/// Chooses the commands of one dispatch, one mapping at a time: a mapping's guards are asked (and its `once` claim made) just before
/// its command is created, so they see what the commands before it changed.
///
/// Holds the dispatch's report (``CommandDispatch/ran``, ``CommandDispatch/commands``,
/// ``CommandDispatch/skipped``), which grows as mappings are chosen. Guards and command factories
/// are called with no lock held; the report's lock guards only its lists.
final class CommandChooser: Sendable {
  struct Report {
    /// The mappings of the snapshot not considered yet, in run order.
    var remaining: ArraySlice<CommandMapping>
    /// The mappings that ran, each with its command, in the order they ran. Room for every
    /// mapping of the snapshot is made at once: one allocation per dispatch.
    var chosen: [(mapping: CommandMapping, command: Operation)] = []
    var skipped: [CommandDispatch.Skip] = []
    /// Whether the dispatch still counts as choosing for the map (see `CommandMapState`).
    var choosing = true

    init(remaining: ArraySlice<CommandMapping>) {
      self.remaining = remaining
      chosen.reserveCapacity(remaining.count)
    }
  }

  let event: any Sendable
  let report: LockedBox<Report>
  /// The map's state, where the dispatch claims `once` mappings (`CommandMapState.claim`) and
  /// ends its choosing (`CommandMapState.endDispatch`).
  private let mapState: LockedBox<CommandMapState>

  init(event: any Sendable, snapshot: [CommandMapping], mapState: LockedBox<CommandMapState>) {
    self.event = event
    self.report = LockedBox(Report(remaining: snapshot[...]))
    self.mapState = mapState
  }

  /// Considers the next mappings in order until one's guards approve (and, for a `once` mapping,
  /// its claim succeeds), and returns its new command; records the skipped ones. Returns `nil`,
  /// and stops choosing, when no mapping is left. Calls user code: never call it with a lock held.
  func next() -> Operation? {
    while let mapping = report.withLock({ $0.remaining.popFirst() }) {
      if let refusal = mapping.refusingGuard(for: event) {
        report.withLock { $0.skipped.append(.init(mapping, .guardRefused(index: refusal))) }
      } else if mapping.runsOnce && !mapState.withLock({ $0.claim(mapping) }) {
        report.withLock { $0.skipped.append(.init(mapping, .alreadyUsed)) }
      } else {
        let command = mapping.command(for: event)
        report.withLock { $0.chosen.append((mapping, command)) }
        return command
      }
    }
    stop()
    return nil
  }

  /// Stops choosing (no mapping left, or the dispatch finished): drops the mappings not
  /// considered, and tells the map once.
  func stop() {
    let (wasChoosing, dropped) = report.withLock { report in
      defer { report.choosing = false }
      return (report.choosing, exchange(&report.remaining, with: []))
    }
    _ = dropped  // released after the lock: a mapping unmapped meanwhile holds the user's closures
    if wasChoosing {
      mapState.withLock { $0.endDispatch() }
    }
  }
}
