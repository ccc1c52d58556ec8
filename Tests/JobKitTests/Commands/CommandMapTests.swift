import Foundation
import JobKit
import Testing

/// Gummi Commander's `GCGICommandMapSpec` and `GuardsSpec`, ported: each test names the spec
/// case it comes from. Gummi dispatches synchronously; here each test awaits the dispatch's job.
@Suite("CommandMap (Gummi map spec)")
struct CommandMapTests {
  // MARK: when command mapping added

  @Test("has no mapping")
  func hasNoMapping() {
    let map = CommandMap()
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  @Test("has a mapping")
  func hasAMapping() {
    let map = CommandMap()
    let mapping = map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    #expect(map.mappings(for: FlagAndStringEvent.self) == [mapping])
    #expect(ObjectIdentifier(mapping.eventType) == ObjectIdentifier(FlagAndStringEvent.self))
    #expect(!mapping.isBlock && !mapping.runsOnce && mapping.priority == 0)
  }

  @Test("removes mapping")
  func removesMapping() async throws {
    let map = CommandMap()
    let mapping = map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    map.unmap(mapping)
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "")
    map.unmap(mapping)  // unmapping again does nothing
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  // MARK: when block mapping added

  @Test("block mapping: has a mapping, executes block, removes mapping")
  func blockMapping() async throws {
    let map = CommandMap()
    let mapping = map.map(FlagAndStringEvent.self) { event in
      event.object.set(flag: true, string: "block")
    }
    #expect(mapping.isBlock)
    #expect(map.mappings(for: FlagAndStringEvent.self) == [mapping])

    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.flag)
    #expect(event.object.string == "block")

    map.unmap(mapping)
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  // MARK: when dispatch event

  @Test("executes a command")
  func executesACommand() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { SetFlagCommand($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.flag)
  }

  @Test("no mapping: nothing runs (older spec)")
  func noMappingRunsNothing() async throws {
    let map = CommandMap()
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(!event.object.flag)
  }

  @Test("runs commands in mapping order", arguments: [(["1", "2"], "12"), (["2", "1"], "21")])
  func mappingOrder(texts: [String], expected: String) async throws {
    let map = CommandMap()
    for text in texts {
      map.map(FlagAndStringEvent.self) { AppendCommand(text, to: $0.object) }
    }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == expected)
  }

  @Test("higher priority runs first, whatever the mapping order", arguments: [false, true])
  func priorityOrder(mapTwentyFirst: Bool) async throws {
    let map = CommandMap()
    let mappings: [(text: String, priority: Int)] = mapTwentyFirst ? [("2", 20), ("1", 10)] : [("1", 10), ("2", 20)]
    for (text, priority) in mappings {
      map.map(FlagAndStringEvent.self, priority: priority) { AppendCommand(text, to: $0.object) }
    }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "21")
  }

  @Test("auto removes mapping: a once mapping runs for the first of two dispatches only")
  func autoRemovesMapping() async throws {
    let map = CommandMap()
    let mapping = map.map(FlagAndStringEvent.self, priority: 10, once: true) { AppendCommand("1", to: $0.object) }
    #expect(mapping.runsOnce)
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    try await map.dispatch(event).run()
    #expect(event.object.string == "1")
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)
  }

  // MARK: guards

  @Test("a mapping without guards has none; with guards, has them")
  func hasGuard() {
    let map = CommandMap()
    let plain = map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    let guarded = map.map(FlagAndStringEvent.self, guards: [Guards.yes]) { AppendCommand("1", to: $0.object) }
    #expect(plain.guardCount == 0)
    #expect(guarded.guardCount == 1)
  }

  @Test(
    "a guard decides whether the command runs",
    arguments: [(Guards.no, ""), (Guards.yes, "1")] as [(@Sendable (FlagAndStringEvent) -> Bool, String)]
  )
  func guardDecides(guard: @escaping @Sendable (FlagAndStringEvent) -> Bool, expected: String) async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self, guards: [`guard`]) { AppendCommand("1", to: $0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == expected)
  }

  @Test("a guard sees the dispatched event (Gummi: injects dependencies into guards)")
  func guardSeesTheEvent() async throws {
    let map = CommandMap()
    let event = FlagAndStringEvent()
    let expected = event.object
    map.map(FlagAndStringEvent.self, guards: [{ $0.object === expected }]) { AppendCommand("1", to: $0.object) }
    try await map.dispatch(event).run()
    try await map.dispatch(FlagAndStringEvent()).run()  // another event: refused
    #expect(event.object.string == "1")
  }
}
