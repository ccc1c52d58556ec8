import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 23, item 6, for the command layer: mappings, their guards and command factories, and
/// extensions are released after the map's (and a dispatch's) locks, never under one. Each
/// probe's `deinit` calls back into the object that dropped it.
@Suite("CommandMap releases the user's values outside its locks", .timeLimit(.minutes(1)))
struct CommandReleaseOutsideLocksTests {
  private final class ProbedExtension: CommandExtension {
    private let probe: Locked<ReleaseProbe?>

    init(_ probe: ReleaseProbe) {
      self.probe = Locked(probe)
    }

    func configure(_ mapper: CommandExtensionMapper) {
      let probe = self.probe.mutate { probe in
        defer { probe = nil }
        return probe
      }
      mapper.map(FlagAndStringEvent.self, guards: [{ [probe] _ in probe != nil }], block: { _ in })
    }
  }

  /// Unloading an extension drops the mappings it made (with their guards and blocks).
  @Test func anUnloadedExtensionsMappings() async {
    let map = CommandMap()
    let released: Latch
    let commandExtension: ProbedExtension
    do {
      let probe = ReleaseProbe { [weak map] in _ = map?.mappings(for: FlagAndStringEvent.self) }
      released = probe.released
      commandExtension = ProbedExtension(probe)
    }
    #expect(map.load(commandExtension))
    onOwnThread { _ = map.unload(commandExtension) }
    #expect(await released.waitOpen(timeout: 30))
  }

  /// An unmapped mapping, its guards and its command factory.
  @Test func anUnmappedMapping() async {
    let map = CommandMap()
    var probe: ReleaseProbe? = ReleaseProbe { [weak map] in _ = map?.mappings(for: FlagAndStringEvent.self) }
    let released = probe!.released
    do {
      let mapping = map.map(FlagAndStringEvent.self, guards: [{ [probe] _ in probe != nil }]) { [probe] _ in
        BlockTask { _ = probe }
      }
      probe = nil
      onOwnThread { map.unmap(mapping) }
    }
    #expect(await released.waitOpen(timeout: 30))
  }

  /// A cancelled sequential dispatch drops the mappings it had not considered yet; here the last
  /// reference to one that was unmapped meanwhile.
  @Test func theMappingsACancelledDispatchDidNotConsider() async throws {
    let map = CommandMap()
    let first = ManualTask("first")
    map.map(FlagAndStringEvent.self, priority: 1) { _ in first }
    let dispatchBox = Locked<CommandDispatch?>(nil)
    var probe: ReleaseProbe? = ReleaseProbe { _ = dispatchBox.value?.skipped }  // the report's lock
    let released = probe!.released
    var second: CommandMapping? = map.map(FlagAndStringEvent.self, guards: [{ [probe] _ in probe != nil }]) {
      _ in BlockTask {}
    }
    probe = nil
    let dispatch = map.dispatch(FlagAndStringEvent())
    dispatchBox.mutate { $0 = dispatch }
    #expect(await first.startedLatch.waitOpen(timeout: 30))
    map.unmap(second!)
    second = nil
    onOwnThread { dispatch.cancel() }
    let ok = await released.waitOpen(timeout: 30)
    #expect(ok)
    guard ok else { return }
    #expect(await dispatch.finishedSoon(within: 30))
    dispatchBox.mutate { $0 = nil }
  }
}

/// `CommandMapState.unload` hands out the extension and the mappings it removes (issue 23).
@Suite("CommandMapState unload")
struct CommandMapStateUnloadTests {
  private final class Extension: CommandExtension {
    func configure(_ mapper: CommandExtensionMapper) {}
  }

  private static func mapping(owner: ObjectIdentifier?) -> CommandMapping {
    CommandMapping(
      eventType: FlagAndStringEvent.self, priority: 0, runsOnce: false, guards: [], isBlock: false, owner: owner,
      makeCommand: { _ in BlockOperation() })
  }

  @Test func unloadHandsOutTheExtensionAndExactlyItsMappings() {
    var state = CommandMapState()
    let commandExtension = Extension()
    let id = ObjectIdentifier(commandExtension)
    let loaded = state.load(commandExtension)
    #expect(loaded)
    let own = [Self.mapping(owner: id), Self.mapping(owner: id)]
    let other = Self.mapping(owner: nil)
    for mapping in own + [other] {
      let added = state.add(mapping)
      #expect(added)
    }
    let unloaded = state.unload(id)
    #expect(unloaded?.commandExtension === commandExtension)
    #expect(Set(unloaded?.mappings ?? []) == Set(own))
    #expect(state.mappings(for: ObjectIdentifier(FlagAndStringEvent.self)) == [other])
    let again = state.unload(id)
    #expect(again == nil)
  }
}
