import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Seed features of groups: a sequence command that adds its commands in `init` (Gummi
/// Commander, MGCommand), the start order of a concurrent group, a command that does not finish
/// when cancelled (MGCommand), and that groups and block tasks release their commands.
@Suite("Groups: seed features", .timeLimit(.minutes(1)))
struct GroupSeedFeatureTests {
  final class MySequenceCommand: SequentialGroup, @unchecked Sendable {
    // @unchecked Sendable: adds no state.
    init(log: EventLog) {
      super.init()
      stopsOnFailure = false
      add(Step("async 1", log: log, finish: .later))
      add(Step("command 1", log: log))
      add(ConcurrentGroup([Step("nested", log: log, finish: .later)]))
      add(Step("command 2", log: log))
    }
  }

  @Test func aSequentialGroupSubclassAddingItsCommandsInInitRunsThemInOrder() async throws {
    let log = EventLog()
    let sequence = MySequenceCommand(log: log)
    try await SequentialGroup([sequence, Step("after", log: log)]).run()
    #expect(log.all == ["async 1", "command 1", "nested", "command 2", "after"])
  }

  @Test func aConcurrentGroupStartsItsTasksInTheOrderTheyWereAdded() async throws {
    let serial = OperationQueue()
    serial.maxConcurrentOperationCount = 1
    let log = EventLog()
    let group = ConcurrentGroup((0..<20).map { Step("\($0)", log: log) }, taskQueue: serial)
    group.add(Step("20", log: log))
    try await group.run()
    #expect(log.all == (0...20).map { "\($0)" })
  }

  /// A command written the MGCommand way: its cancel stops nothing and does not finish it.
  final class MGStyleCommand: ConcurrentOperation, @unchecked Sendable {
    // @unchecked Sendable: `started` is thread-safe.
    let started = Latch()
    override func operationStart() { started.open() }
    override func operationCancelled() {}  // "you don't have to call the completeHandler"
  }

  @Test func aCancelledGroupWaitingForACommandThatIgnoresItsCancelNamesIt() async throws {
    let clock = ManualClock()
    let command = MGStyleCommand()
    command.name = "DelayCommand"
    let group = ConcurrentGroup([command, BlockTask {}])
    QuietMisuse.silence(group)
    group.clock = clock
    group.cancellationGracePeriod = .seconds(2)
    group.startJob()
    #expect(await command.started.waitOpen())
    group.cancel()
    #expect(await clock.waitForScheduled(1))
    clock.advance(by: .seconds(2))
    #expect(group.misuses == [JobKitError(.unfinishedAfterCancel)])
    #expect(group.misuses.first?.message.contains("MGStyleCommand \"DelayCommand\"") == true)
    #expect(!group.isFinished)
    command.operationDone()
    await #expect(throws: CancellationError.self) { try await group.run() }
  }

  @Test func groupsAndBlockTasksReleaseTheirCommands() async throws {
    let tracker = ReleaseTracker()
    do {
      let inner = BlockTask {}
      let step = Step("x", log: EventLog())
      let nested = ConcurrentGroup([inner, BlockTask(async: {})])
      let group = SequentialGroup([step, nested])
      tracker.watch(inner, "block task")
      tracker.watch(step, "step")
      tracker.watch(nested, "nested group")
      tracker.watch(group, "group")
      try await group.run()
    }
    #expect(await tracker.survivors().isEmpty)
  }

  @Test func aCommandQueueReleasesItsCommands() async throws {
    let tracker = ReleaseTracker()
    let queue = CommandQueue(mode: .sequential)
    let drained = Latch()
    queue.onDrained = { _ in drained.open() }
    do {
      let command = BlockTask {}
      tracker.watch(command, "command")
      queue.add(command)
    }
    #expect(await drained.waitOpen())
    #expect(await tracker.survivors().isEmpty)
  }
}
