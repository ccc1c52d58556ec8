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
    var ran: [CommandMapping] = []
    var commands: [Operation] = []
    var skipped: [CommandDispatch.Skip] = []
    /// Whether the dispatch still counts as choosing for the map (see `CommandMapState`).
    var choosing = true
  }

  let event: any Sendable
  let report: LockedBox<Report>
  /// Claims a `once` mapping for this dispatch (the map's `CommandMapState.claim`).
  private let claim: @Sendable (CommandMapping) -> Bool
  /// Tells the map this dispatch stopped choosing (the map's `CommandMapState.endDispatch`).
  private let endChoosing: @Sendable () -> Void

  init(
    event: any Sendable,
    snapshot: [CommandMapping],
    claim: @escaping @Sendable (CommandMapping) -> Bool,
    endChoosing: @escaping @Sendable () -> Void
  ) {
    self.event = event
    self.report = LockedBox(Report(remaining: snapshot[...]))
    self.claim = claim
    self.endChoosing = endChoosing
  }

  /// Considers the next mappings in order until one's guards approve (and, for a `once` mapping,
  /// its claim succeeds), and returns its new command; records the skipped ones. Returns `nil`,
  /// and stops choosing, when no mapping is left. Calls user code: never call it with a lock held.
  func next() -> Operation? {
    while let mapping = report.withLock({ $0.remaining.popFirst() }) {
      if let refusal = mapping.refusingGuard(for: event) {
        report.withLock { $0.skipped.append(.init(mapping, .guardRefused(index: refusal))) }
      } else if mapping.runsOnce && !claim(mapping) {
        report.withLock { $0.skipped.append(.init(mapping, .alreadyUsed)) }
      } else {
        let command = mapping.command(for: event)
        report.withLock {
          $0.ran.append(mapping)
          $0.commands.append(command)
        }
        return command
      }
    }
    stop()
    return nil
  }

  /// Every command left, in order (a concurrent dispatch chooses them all at once).
  func all() -> [Operation] {
    var commands: [Operation] = []
    while let command = next() {
      commands.append(command)
    }
    return commands
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
      endChoosing()
    }
  }
}
