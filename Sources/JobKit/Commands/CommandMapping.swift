import Foundation

/// A handle to one mapping of an event type to a command (or block) in a ``CommandMap``.
///
/// Returned by ``CommandMap/map(_:priority:once:guards:to:)`` and
/// ``CommandMap/map(_:priority:once:guards:block:)``; pass it to ``CommandMap/unmap(_:)`` to
/// remove the mapping. A dispatch lists the mappings it ran and skipped
/// (``CommandDispatch/ran``, ``CommandDispatch/skipped``) by their handles.
///
/// Handles compare by identity: every `map` call makes a new mapping, even for the same event
/// type and priority. A handle is immutable and can be used from any thread.
public final class CommandMapping: Hashable, Sendable, CustomStringConvertible {
  /// The exact event type the mapping reacts to: a dispatched event runs the mapping only if its
  /// dynamic type is this type (not a subclass of it).
  public let eventType: Any.Type
  /// Where the mapping runs among the mappings of its event type: higher first, equal
  /// priorities in the order they were mapped.
  public let priority: Int
  /// `true` if the mapping removes itself once it ran (see ``CommandMap/map(_:priority:once:guards:to:)``).
  public let runsOnce: Bool
  /// How many guards the mapping has.
  public let guardCount: Int
  /// `true` for a block mapping, `false` for a command mapping.
  public let isBlock: Bool

  /// Identity of `eventType`, the key the map files the mapping under.
  let eventKey: ObjectIdentifier
  /// The extension that made the mapping, if any.
  let owner: ObjectIdentifier?
  /// Asks the guards in order; returns the index of the first refusal, or `nil` if all approve.
  private let firstRefusal: @Sendable (any Sendable) -> Int?
  private let makeCommand: @Sendable (any Sendable) -> Operation

  init<Event: Sendable>(
    eventType: Event.Type,
    priority: Int,
    runsOnce: Bool,
    guards: [@Sendable (Event) -> Bool],
    isBlock: Bool,
    owner: ObjectIdentifier?,
    makeCommand: @escaping @Sendable (Event) -> Operation
  ) {
    self.eventType = eventType
    self.eventKey = ObjectIdentifier(eventType)
    self.priority = priority
    self.runsOnce = runsOnce
    self.guardCount = guards.count
    self.isBlock = isBlock
    self.owner = owner
    // The map only hands a mapping events whose dynamic type is exactly `eventType`, a type
    // `Event` or a subtype of it, so the casts below always succeed.
    self.firstRefusal = { event in
      let event = event as! Event
      return guards.firstIndex { !$0(event) }
    }
    self.makeCommand = { event in makeCommand(event as! Event) }
  }

  /// Asks the guards, in order, stopping at the first refusal. Calls user code: never call it
  /// while holding a lock.
  func refusingGuard(for event: any Sendable) -> Int? {
    guardCount == 0 ? nil : firstRefusal(event)
  }

  /// Creates the command for `event`. Calls user code: never call it while holding a lock.
  func command(for event: any Sendable) -> Operation {
    makeCommand(event)
  }

  /// Handles are equal only if they are the same mapping.
  public static func == (lhs: CommandMapping, rhs: CommandMapping) -> Bool {
    lhs === rhs
  }

  /// Hashes the mapping's identity, consistent with `==`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(self))
  }

  /// For example `CommandMapping(ServerResponse, priority: 10, once, 1 guard)`.
  public var description: String {
    var parts = ["\(eventType)", "priority: \(priority)"]
    if isBlock { parts.append("block") }
    if runsOnce { parts.append("once") }
    if guardCount > 0 { parts.append(guardCount == 1 ? "1 guard" : "\(guardCount) guards") }
    return "CommandMapping(\(parts.joined(separator: ", ")))"
  }
}
