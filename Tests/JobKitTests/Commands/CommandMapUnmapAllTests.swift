import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// `CommandMap.unmapAll()`: Gummi Commander's `GCGICommandMapSpec` "unMapAll" case ("removes all
/// mappings": every trigger of the map is unmapped, a later dispatch runs nothing) and its
/// dispatcher's `removeAllObservers`.
@Suite("CommandMap.unmapAll (Gummi unMapAll)", .timeLimit(.minutes(1)))
struct CommandMapUnmapAllTests {
  @Test("removes all mappings: commands, blocks, once, of every event type")
  func removesAllMappings() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    map.map(FlagAndStringEvent.self, priority: 5, once: true) { AppendCommand("2", to: $0.object) }
    map.map(FlagAndStringEvent.self, block: { $0.object.append("3") })
    map.map(OtherEvent.self, block: { _ in })
    map.unmapAll()
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
    #expect(map.mappings(for: OtherEvent.self).isEmpty)

    let event = FlagAndStringEvent()
    let dispatch = map.dispatch(event)
    try await dispatch.run()
    #expect(event.object.string == "")
    #expect(dispatch.ran.isEmpty && dispatch.skipped.isEmpty)

    map.unmapAll()  // on an empty map: does nothing
    let mapping = map.map(FlagAndStringEvent.self) { AppendCommand("4", to: $0.object) }
    #expect(map.mappings(for: FlagAndStringEvent.self) == [mapping])  // the map is usable again
  }

  @Test("removes an extension's mappings; the extension stays loaded")
  func extensionsStayLoaded() async throws {
    let map = CommandMap()
    let game = TestExtension { mapper in mapper.map(FlagAndStringEvent.self) { AppendCommand("ext", to: $0.object) } }
    #expect(map.load(game))
    map.unmapAll()
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
    #expect(!map.load(game))  // still loaded
    #expect(map.unload(game))
    #expect(game.didUnloadCount == 1)
  }

  @Test("a dispatch that began before still runs its snapshot")
  func aDispatchInFlightRunsItsSnapshot() async throws {
    let map = CommandMap()
    let gate = Gate()
    map.map(FlagAndStringEvent.self, priority: 1) { GatedCommand("1", gate: gate, object: $0.object) }
    map.map(FlagAndStringEvent.self) { AppendCommand("2", to: $0.object) }
    let event = FlagAndStringEvent()
    let dispatch = map.dispatch(event)
    map.unmapAll()
    gate.open()
    try await dispatch.run()
    #expect(event.object.string == "12")
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  @Test("releases the removed closures outside its lock")
  func releasesOutsideTheLock() async throws {
    let map = CommandMap()
    let released = Self.mapCapturingProbe(in: map)
    // On a thread of its own: a release under the map's lock would deadlock this thread only.
    Thread { map.unmapAll() }.start()
    #expect(await released.waitOpen())
  }

  /// Maps a command whose factory holds the only reference to a probe that calls back into
  /// `map` when released. Returns the probe's latch.
  private static func mapCapturingProbe(in map: CommandMap) -> Latch {
    let probe = ReleaseProbe { _ = map.mappings(for: FlagAndStringEvent.self) }  // calls back into the map
    map.map(FlagAndStringEvent.self) { [probe] event in
      _ = probe
      return AppendCommand("1", to: event.object)
    }
    return probe.released
  }
}
