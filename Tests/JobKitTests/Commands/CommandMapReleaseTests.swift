import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Gummi Commander: "Commands get destroyed immediately after execution."
@Suite("CommandMap releases its commands", .timeLimit(.minutes(1)))
struct CommandMapReleaseTests {
  @Test(arguments: [false, true])
  func commandsAndTheDispatchAreFreedOnceRun(concurrent: Bool) async throws {
    let tracker = ReleaseTracker()
    let map = CommandMap(concurrent: concurrent)
    map.map(FlagAndStringEvent.self) { event in
      let command = AppendCommand("a", to: event.object)
      tracker.watch(command, "command")
      return command
    }
    map.map(FlagAndStringEvent.self, block: { event in event.object.append("b") })
    do {
      let event = FlagAndStringEvent()
      let dispatch = map.dispatch(event)
      tracker.watch(dispatch, "dispatch")
      for command in dispatch.commands { tracker.watch(command, "\(type(of: command))") }
      try await dispatch.run()
      #expect(event.object.string.count == 2)
    }
    #expect(await tracker.survivors().isEmpty)
    #expect(map.mappings(for: FlagAndStringEvent.self).count == 2)
  }
}
