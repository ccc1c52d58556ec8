import Foundation
import JobKit
import Testing

/// Gummi Commander's `CommandChainSpec`, ported. Gummi's sequence commands are
/// ``SequentialGroup``s here, its async commands ``ConcurrentOperation``s that finish after a
/// short delay in their own work (the longer delay comes first, so the order comes from the
/// group, not from timing). Every assertion waits on the dispatch's job, never on a sleep.
@Suite("CommandChain (Gummi chain spec)")
struct CommandChainTests {
  @Test("executes a command")
  func executesACommand() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    map.map(FlagAndStringEvent.self) { SetFlagCommand($0.object) }
    let event = FlagAndStringEvent()
    #expect(!event.object.flag)
    #expect(event.object.string == "")
    try await map.dispatch(event).run()
    #expect(event.object.flag)
    #expect(event.object.string == "1")
  }

  @Test("executes an async command: nothing yet right after dispatch, \"1_async\" once it finished")
  func executesAnAsyncCommand() async throws {
    let map = CommandMap()
    let gate = Gate()
    map.map(FlagAndStringEvent.self) { GatedCommand("1_async", gate: gate, object: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    #expect(event.object.string == "")
    gate.open()
    try await job.run()
    #expect(event.object.string == "1_async")
  }

  @Test("executes Gummi's Append1AsyncCommand")
  func executesDelayedAsyncCommand() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { DelayedAppendCommand.append1Async($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "1_async")
  }

  @Test("executes a sequence command")
  func executesASequenceCommand() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { Sequences.append12AndSetFlag($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.flag)
    #expect(event.object.string == "12")
  }

  @Test("executes a sequence command with async commands added")
  func executesAsyncSequence() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { Sequences.append12Async3AndSetFlag($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.flag)
    #expect(event.object.string == "1_async2_async3")
  }

  @Test("executes a sequence command with sequence commands in it")
  func executesNestedSequences() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { Sequences.double($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "1_async2_async32_async1_async2_async3")
  }

  @Test("a sequence stops at the first failure when stopsOnFailure is set")
  func sequenceStopsWhenNoSuccess() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { NoSuccessSequence($0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    // The dispatch reports the sequence's failure, which is the NoSuccess command's error.
    let failure = try #require(await #expect(throws: JobFailures.self) { try await job.run() })
    #expect(failure.failures.map(\.group) == ["NoSuccessSequence"])
    #expect(failure.failures.map { $0.error as? TestError } == [TestError(7)])
    #expect(event.object.string == "errorNoSuccess")
  }

  @Test("dispatching twice runs a fresh sequence each time (Gummi: executed multiple times)")
  func sequenceRunsForEachDispatch() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { Sequences.append12AndSetFlag($0.object) }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    try await map.dispatch(event).run()
    #expect(event.object.flag)
    #expect(event.object.string == "1212")
  }
}
