import Foundation

/// What a ``CommandExtension`` maps through: the same `map` calls as ``CommandMap``, but each
/// mapping is recorded as the extension's, so ``CommandMap/unload(_:)`` removes it.
///
/// A mapping made through a mapper whose extension is no longer loaded is not added: its handle
/// is returned but no dispatch runs it.
public struct CommandExtensionMapper: Sendable {
  /// The map the extension is loaded into, for example to dispatch events from a command. Its
  /// own `map` calls are not recorded as the extension's.
  public let commandMap: CommandMap
  private let owner: ObjectIdentifier

  init(commandMap: CommandMap, owner: ObjectIdentifier) {
    self.commandMap = commandMap
    self.owner = owner
  }

  /// Maps `event` to a command, as ``CommandMap/map(_:priority:once:guards:to:)`` does, on
  /// behalf of the extension.
  @discardableResult
  public func map<Event: Sendable>(
    _ event: Event.Type,
    priority: Int = 0,
    once: Bool = false,
    guards: [@Sendable (Event) -> Bool] = [],
    to makeCommand: @escaping @Sendable (Event) -> Operation
  ) -> CommandMapping {
    commandMap.addMapping(event, priority: priority, once: once, guards: guards, owner: owner, makeCommand: makeCommand)
  }

  /// Maps `event` to a block, as ``CommandMap/map(_:priority:once:guards:block:)`` does, on
  /// behalf of the extension.
  @discardableResult
  public func map<Event: Sendable>(
    _ event: Event.Type,
    priority: Int = 0,
    once: Bool = false,
    guards: [@Sendable (Event) -> Bool] = [],
    block: @escaping @Sendable (Event) -> Void
  ) -> CommandMapping {
    commandMap.addMapping(event, priority: priority, once: once, guards: guards, owner: owner, block: block)
  }
}
