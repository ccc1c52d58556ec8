import JobKit

/// Prints what each dispatch did: which mappings ran, in order, and why the others did not.
///
/// The map's report (``CommandDispatch/ran``, ``CommandDispatch/skipped``) names mappings by
/// handle; the reporter gives them the names and guard descriptions the sample chose.
final class Reporter: Sendable {
  private struct Entry {
    let mapping: CommandMapping
    let name: String
    let guardNames: [String]
    /// Why the mapping can be gone without having run, for example "game extension unloaded".
    let removal: String
  }

  private let entries = Locked<[Entry]>([])
  /// `once` mappings that ran, so a later event can say why they did not run again.
  private let used = Locked<Set<CommandMapping>>([])

  /// Names `mapping` (and its guards, in order) for the reports; `removal` says why it may be
  /// unmapped later. Returns `mapping`.
  @discardableResult
  func name(
    _ mapping: CommandMapping, _ name: String, guards: [String] = [], removal: String = "unmapped"
  ) -> CommandMapping {
    entries.withValue { $0.append(Entry(mapping: mapping, name: name, guardNames: guards, removal: removal)) }
    return mapping
  }

  /// The header line, printed before the dispatch so the commands' own lines come under it.
  func header(_ response: ServerResponse) {
    print(indent(for: response, inner: false) + "▸ \(response)")
  }

  /// Prints the report of a finished dispatch of `response`.
  func report(_ job: CommandDispatch, for response: ServerResponse) {
    let pad = indent(for: response, inner: true)
    let entries = entries.withValue { $0 }
    func name(_ mapping: CommandMapping) -> String {
      entries.first { $0.mapping == mapping }?.name ?? "\(mapping)"
    }
    used.withValue { used in
      for mapping in job.ran where mapping.runsOnce { used.insert(mapping) }
    }
    if let error = job.error { print(pad + "failed: \(error)") }
    print(pad + "ran: " + (job.ran.isEmpty ? "nothing" : job.ran.map(name).joined(separator: ", ")))
    var notes: [String] = []
    for skip in job.skipped {
      switch skip.reason {
      case .guardRefused(let index):
        let guardName = entries.first { $0.mapping == skip.mapping }?.guardNames[index] ?? "guard \(index)"
        notes.append("\(name(skip.mapping)) (guard \"\(guardName)\" refused)")
      case .alreadyUsed:
        notes.append("\(name(skip.mapping)) (already used by another dispatch)")
      }
    }
    let considered = Set(job.ran + job.skipped.map(\.mapping))
    let usedOnce = used.withValue { $0 }
    for entry in entries where entry.mapping.eventType == ServerResponse.self && !considered.contains(entry.mapping) {
      let why = usedOnce.contains(entry.mapping) ? "once, already used" : entry.removal
      notes.append("\(entry.name) (\(why))")
    }
    if !notes.isEmpty { print(pad + "did not run: " + notes.joined(separator: ", ")) }
  }

  /// Prints a line of a command handling `response`, under its header.
  func line(_ text: String, for response: ServerResponse) {
    print(indent(for: response, inner: true) + text)
  }

  /// A retry's dispatch is nested under the dispatch that retried.
  private func indent(for response: ServerResponse, inner: Bool) -> String {
    String(repeating: "    ", count: response.attempt - 1 + (inner ? 1 : 0))
  }
}
