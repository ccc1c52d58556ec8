/// The state of one ``CommandMap``: its mappings per event type in run order, its loaded
/// extensions, and the `once` mappings claimed by dispatches still choosing their commands.
///
/// Changed only by the pure transitions below, under the map's lock. No transition calls user
/// code: guards and command factories run in `CommandMap.dispatch` with the lock released.
struct CommandMapState {
  /// Per exact event type, the mappings in run order: higher priority first, equal priorities in
  /// mapping order.
  private(set) var mappings: [ObjectIdentifier: [CommandMapping]] = [:]
  /// The extensions loaded now, by identity. Held strongly, so an identity cannot be reused by
  /// another object while its extension is loaded.
  private(set) var loadedExtensions: [ObjectIdentifier: any CommandExtension] = [:]
  /// `once` mappings a dispatch has claimed, kept while any dispatch is choosing its commands,
  /// because only such a dispatch can still hold one of them in its snapshot.
  private(set) var claimedOnce: Set<ObjectIdentifier> = []
  /// Dispatches between ``beginDispatch(of:)`` and ``endDispatch()``.
  private(set) var choosingDispatches = 0

  // MARK: Mapping and unmapping

  /// Adds `mapping` before the first mapping of its event type with a strictly lower priority.
  /// Returns `false` (and adds nothing) when it belongs to an extension that is not loaded.
  mutating func add(_ mapping: CommandMapping) -> Bool {
    if let owner = mapping.owner, loadedExtensions[owner] == nil { return false }
    var list = mappings[mapping.eventKey, default: []]
    let index = list.firstIndex { $0.priority < mapping.priority } ?? list.endIndex
    list.insert(mapping, at: index)
    mappings[mapping.eventKey] = list
    return true
  }

  /// Removes `mapping` if it is mapped. Returns `true` if it was.
  @discardableResult
  mutating func remove(_ mapping: CommandMapping) -> Bool {
    guard var list = mappings[mapping.eventKey],
      let index = list.firstIndex(where: { $0 === mapping })
    else { return false }
    list.remove(at: index)
    mappings[mapping.eventKey] = list.isEmpty ? nil : list
    return true
  }

  /// Removes every mapping, of every event type and every extension; the extensions stay
  /// loaded. Returns the removed mappings, for the caller to release after the lock (their
  /// closures may capture values whose `deinit` runs user code).
  mutating func removeAll() -> [ObjectIdentifier: [CommandMapping]] {
    defer { mappings = [:] }
    return mappings
  }

  func mappings(for eventKey: ObjectIdentifier) -> [CommandMapping] {
    mappings[eventKey] ?? []
  }

  // MARK: Dispatching

  /// A dispatch of an event of type `eventKey` starts choosing its commands: returns the
  /// snapshot it works on.
  mutating func beginDispatch(of eventKey: ObjectIdentifier) -> [CommandMapping] {
    choosingDispatches += 1
    return mappings[eventKey] ?? []
  }

  /// A dispatch wants to run the `once` mapping `mapping`, whose guards approved. Returns `true`
  /// if this dispatch won it (and removes it from the map), `false` if another dispatch already
  /// did.
  mutating func claim(_ mapping: CommandMapping) -> Bool {
    let id = ObjectIdentifier(mapping)
    guard claimedOnce.insert(id).inserted else { return false }
    remove(mapping)
    return true
  }

  /// A dispatch chose its commands. Once no dispatch is choosing, no snapshot holds a claimed
  /// mapping any more, so the claims are forgotten (the map stays O(mappings)).
  mutating func endDispatch() {
    choosingDispatches -= 1
    if choosingDispatches == 0 {
      claimedOnce.removeAll(keepingCapacity: true)
    }
  }

  // MARK: Extensions

  /// Marks `commandExtension` loaded. Returns `false` if it already was.
  mutating func load(_ commandExtension: any CommandExtension) -> Bool {
    let id = ObjectIdentifier(commandExtension)
    guard loadedExtensions[id] == nil else { return false }
    loadedExtensions[id] = commandExtension
    return true
  }

  /// What ``unload(_:)`` took out of the map, for the caller to release after the lock: the
  /// mappings' guards and factories are the user's closures, and the extension the user's object.
  struct Unloaded {
    let commandExtension: any CommandExtension
    var mappings: [CommandMapping] = []
  }

  /// Marks the extension unloaded and removes every mapping it made, returning them. Returns
  /// `nil` (and changes nothing) if it was not loaded.
  mutating func unload(_ extensionID: ObjectIdentifier) -> Unloaded? {
    guard let commandExtension = loadedExtensions.removeValue(forKey: extensionID) else { return nil }
    var unloaded = Unloaded(commandExtension: commandExtension)
    for (key, list) in mappings {
      let kept = list.filter { $0.owner != extensionID }
      if kept.count != list.count {
        unloaded.mappings += list.filter { $0.owner == extensionID }
        mappings[key] = kept.isEmpty ? nil : kept
      }
    }
    return unloaded
  }
}
