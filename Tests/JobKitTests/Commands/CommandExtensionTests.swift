import Foundation
import JobKit
import Testing

/// Rule 5: an extension's mappings are loaded and unloaded together (Gummi Commander's
/// `GCGIExtension`: `configure`, then `unload` removes every mapping the extension made).
@Suite("CommandExtension")
struct CommandExtensionTests {
  @Test("load calls configure once; its mappings run")
  func loadConfigures() async throws {
    let map = CommandMap()
    let calls = Locked(0)
    let game = TestExtension { mapper in
      calls.mutate { $0 += 1 }
      #expect(mapper.commandMap === map)
      mapper.map(FlagAndStringEvent.self) { AppendCommand("ext", to: $0.object) }
      mapper.map(FlagAndStringEvent.self, priority: 1) { event in event.object.append("block") }
    }
    #expect(map.load(game))
    #expect(!map.load(game))  // already loaded: configure is not called again
    #expect(calls.value == 1)

    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "blockext")
  }

  @Test("unload removes exactly the extension's mappings and runs its clean-up once")
  func unloadRemovesExactlyItsMappings() async throws {
    let map = CommandMap()
    let own = map.map(FlagAndStringEvent.self) { AppendCommand("own", to: $0.object) }
    let otherExtension = TestExtension { $0.map(OtherEvent.self) { AppendCommand("other", to: $0.object) } }
    let game = TestExtension { mapper in
      mapper.map(FlagAndStringEvent.self, priority: 1) { AppendCommand("game", to: $0.object) }
      mapper.map(OtherEvent.self) { AppendCommand("game", to: $0.object) }
    }
    map.load(otherExtension)
    map.load(game)
    #expect(map.mappings(for: FlagAndStringEvent.self).count == 2)
    #expect(map.mappings(for: OtherEvent.self).count == 2)

    #expect(map.unload(game))
    #expect(game.didUnloadCount == 1)
    #expect(map.mappings(for: FlagAndStringEvent.self) == [own])
    #expect(map.mappings(for: OtherEvent.self).count == 1)
    #expect(!map.unload(game))  // not loaded any more
    #expect(game.didUnloadCount == 1)
    #expect(otherExtension.didUnloadCount == 0)

    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "own")
    let other = OtherEvent()
    try await map.dispatch(other).run()
    #expect(other.object.string == "other")
  }

  @Test("mappings made later through a kept mapper belong to the extension; after unload they are not added")
  func keptMapper() throws {
    let map = CommandMap()
    let game = TestExtension { _ in }
    map.load(game)
    let mapper = try #require(game.lastMapper)
    let late = mapper.map(FlagAndStringEvent.self) { AppendCommand("late", to: $0.object) }
    #expect(map.mappings(for: FlagAndStringEvent.self) == [late])
    map.unload(game)
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
    mapper.map(FlagAndStringEvent.self) { AppendCommand("too late", to: $0.object) }
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  @Test("an extension can be loaded again after it was unloaded; a once mapping it made may already be gone")
  func reload() async throws {
    let map = CommandMap()
    let game = TestExtension { mapper in
      mapper.map(FlagAndStringEvent.self, once: true) { AppendCommand("once", to: $0.object) }
      mapper.map(FlagAndStringEvent.self) { AppendCommand("each", to: $0.object) }
    }
    map.load(game)
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    try await map.dispatch(event).run()
    #expect(map.unload(game))
    try await map.dispatch(event).run()
    #expect(map.load(game))
    try await map.dispatch(event).run()
    #expect(event.object.string == "onceeacheach" + "onceeach")
  }

  @Test("a dispatch that took its snapshot before the unload still runs the extension's commands")
  func unloadDuringDispatch() async throws {
    let map = CommandMap()
    let game = TestExtension { $0.map(FlagAndStringEvent.self) { AppendCommand("game", to: $0.object) } }
    map.load(game)
    map.map(FlagAndStringEvent.self, priority: 1, guards: [{ _ in map.unload(game) }]) {
      AppendCommand("unloader", to: $0.object)
    }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "unloadergame")
    #expect(game.didUnloadCount == 1)
  }
}
