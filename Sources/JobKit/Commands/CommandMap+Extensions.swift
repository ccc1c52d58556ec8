import Foundation

extension CommandMap {
  /// Loads `commandExtension`: marks it loaded, then calls its
  /// ``CommandExtension/configure(_:)`` on this thread to make its mappings.
  ///
  /// Safe from any thread. Returns `false`, and does nothing, if this instance is already loaded
  /// into this map.
  @discardableResult
  public func load(_ commandExtension: some CommandExtension) -> Bool {
    guard markLoaded(commandExtension) else { return false }
    let mapper = CommandExtensionMapper(commandMap: self, owner: ObjectIdentifier(commandExtension))
    commandExtension.configure(mapper)
    return true
  }

  /// Unloads `commandExtension`: removes, at once, exactly the mappings it made (those still
  /// mapped), then calls its ``CommandExtension/didUnload()`` on this thread.
  ///
  /// Safe from any thread. A dispatch that took its snapshot before still runs the removed
  /// mappings. Returns `false`, and does nothing, if the extension is not loaded into this map.
  @discardableResult
  public func unload(_ commandExtension: some CommandExtension) -> Bool {
    guard markUnloaded(ObjectIdentifier(commandExtension)) else { return false }
    commandExtension.didUnload()
    return true
  }
}
