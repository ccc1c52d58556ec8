import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Gummi Commander's `executeAction:`: a mapping's guards are asked just before its command is
/// created, after the commands of higher priority ran, so a guard sees what they changed.
@Suite("When a dispatch asks guards", .timeLimit(.minutes(1)))
struct CommandGuardTimingTests {
  @Test("a guard sees what the commands of higher priority changed")
  func guardSeesEarlierCommands() async throws {
    let map = CommandMap()
    let seen = Locked<[String]>([])
    map.map(FlagAndStringEvent.self, priority: 10) { AppendCommand("1", to: $0.object) }
    map.map(FlagAndStringEvent.self, priority: 5) { SetFlagCommand($0.object) }
    let guarded = map.map(
      FlagAndStringEvent.self,
      guards: [
        { event in
          seen.mutate { $0.append("\(event.object.flag) \(event.object.string)") }
          return event.object.flag
        }
      ]
    ) { AppendCommand("2", to: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    try await job.run()
    #expect(seen.value == ["true 1"])
    #expect(event.object.string == "12")
    #expect(job.ran.last == guarded)
    #expect(job.skipped.isEmpty)
  }

  @Test("a guard refusing because of an earlier command skips only its own mapping")
  func guardRefusesAfterEarlierCommand() async throws {
    let map = CommandMap()
    // The first command waits for `release`: once it finished, the dispatch asks the next guard
    // on whichever thread routes that finish, possibly before `dispatch` returned.
    let release = BlockOperation {}
    map.map(FlagAndStringEvent.self, priority: 1) { event in
      let command = SetFlagCommand(event.object)
      command.addDependency(release)
      return command
    }
    let refused = map.map(FlagAndStringEvent.self, guards: [{ !$0.object.flag }]) { AppendCommand("x", to: $0.object) }
    map.map(FlagAndStringEvent.self, priority: -1) { AppendCommand("last", to: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    // Only the first mapping was considered when dispatch returned.
    #expect(job.ran.count == 1 && job.skipped.isEmpty)
    release.start()
    try await job.run()
    #expect(event.object.string == "last")
    #expect(job.skipped == [CommandDispatch.Skip(refused, .guardRefused(index: 0))])
    #expect(job.ran.count == 2 && job.commands.count == 2)
  }

  @Test("a cancelled dispatch never considers the mappings whose turn had not come")
  func cancelStopsChoosing() async throws {
    let map = CommandMap()
    let asked = Locked(0)
    let first = ManualTask("first")
    map.map(FlagAndStringEvent.self, priority: 1) { _ in first }
    map.map(FlagAndStringEvent.self, guards: [{ _ in asked.mutate { $0 += 1 } == () }]) { _ in ManualTask() }
    let job = map.dispatch(FlagAndStringEvent())
    #expect(await first.startedLatch.waitOpen())
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(asked.value == 0)
    #expect(job.ran.count == 1 && job.skipped.isEmpty)
  }

  @Test("on a concurrent map every guard is asked at dispatch")
  func concurrentMapAsksAllAtDispatch() async throws {
    let map = CommandMap(concurrent: true)
    let asked = Locked(0)
    for _ in 0..<3 {
      map.map(FlagAndStringEvent.self, guards: [{ _ in asked.mutate { $0 += 1 } == () }]) { _ in ManualTask() }
    }
    let job = map.dispatch(FlagAndStringEvent())
    #expect(asked.value == 3 && job.commands.count == 3)
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
  }
}
