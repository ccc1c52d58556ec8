import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// What a command saw of the map's queue while it ran.
private struct Sighting: Sendable {
  let current: OperationQueue?
  let inOperations: Bool
}

/// A map that made its queue itself: its dispatches start their `ConcurrentOperation` commands
/// themselves while nobody has read the map's `queue` (see `OwnQueueFlag`), as a job does on
/// its own queue; each test checks that what a user can observe is kept, and that reading the
/// map's `queue` (or a dispatch's `taskQueue`) or a plain `Operation` command switches to the queue.
@Suite("Command map: private queue")
struct CommandMapPrivateQueueTests {
  /// A block mapping of `FlagAndStringEvent` that records what it sees of `map`'s queue (read by
  /// the map's own accessor so as not to hand it out), logging `name`.
  @discardableResult
  private static func mapSighting(
    _ map: CommandMap, priority: Int = 0, into seen: Locked<[Sighting]>, log: EventLog? = nil, name: String = ""
  ) -> CommandMapping {
    let queue = map.queueOfCommands
    return map.map(
      FlagAndStringEvent.self, priority: priority,
      block: { _ in
        let current = OperationQueue.current
        seen.mutate {
          $0.append(Sighting(current: current, inOperations: queue.operations.contains { $0.isExecuting }))
        }
        log?.record(name)
      })
  }

  @Test("block commands skip the queue nobody has seen, and still run in priority order")
  func blockCommandsSkipTheQueueNobodyHasSeen() async throws {
    let map = CommandMap()
    let seen = Locked<[Sighting]>([])
    let log = EventLog()
    for (priority, name) in [(2, "a"), (1, "b"), (0, "c")] {
      Self.mapSighting(map, priority: priority, into: seen, log: log, name: name)
    }
    for _ in 0..<10 {
      let dispatch = map.dispatch(FlagAndStringEvent())
      try await dispatch.run()
      #expect(dispatch.ran.count == 3)
    }
    #expect(seen.value.count == 30)
    for sighting in seen.value {
      #expect(sighting.current == nil)
      #expect(!sighting.inOperations)
    }
    #expect(log.all == Array(repeating: ["a", "b", "c"], count: 10).flatMap { $0 })
    #expect(map.privateQueue?.isExposed == false)
  }

  @Test("reading the map's queue first sends every command through it", arguments: [false, true])
  func readingTheQueueFirstSendsEveryCommandThroughIt(concurrent: Bool) async throws {
    let map = CommandMap(concurrent: concurrent)
    let seen = Locked<[Sighting]>([])
    for priority in 0..<3 {
      Self.mapSighting(map, priority: priority, into: seen)
    }
    let queue = map.queue
    #expect(map.privateQueue?.isExposed == true)
    for _ in 0..<5 {
      try await map.dispatch(FlagAndStringEvent()).run()
    }
    #expect(seen.value.count == 15)
    for sighting in seen.value {
      #expect(sighting.current === queue)
      #expect(sighting.inOperations)
    }
  }

  /// A serial queue set up through `queue` before the first dispatch: one command at a time, the
  /// first commands of the dispatches in dispatch order, every command an operation of the queue.
  @Test("a map made serial through its queue keeps the serial order")
  func aMapMadeSerialThroughItsQueueKeepsTheSerialOrder() async throws {
    let map = CommandMap()
    map.queue.maxConcurrentOperationCount = 1
    let running = Locked(0)
    let peak = Locked(0)
    let order = EventLog()
    let currents = Locked<[OperationQueue?]>([])
    map.map(
      OtherEvent.self,
      block: { event in
        let now = running.mutate {
          $0 += 1
          return $0
        }
        peak.mutate { $0 = max($0, now) }
        currents.mutate { $0.append(OperationQueue.current) }
        order.record(event.object.string)
        running.mutate { $0 -= 1 }
      })
    let dispatches = (0..<50).map { index in
      let object = FlagAndString()
      object.append("\(index)")
      return map.dispatch(OtherEvent(object))
    }
    for dispatch in dispatches {
      try await dispatch.run()
    }
    #expect(order.all == (0..<50).map { "\($0)" })
    #expect(peak.value == 1)
    #expect(currents.value.allSatisfy { $0 === map.queueOfCommands })
  }

  /// The hand-out in the middle of a run, by a read of one dispatch's `taskQueue`: the command
  /// that runs already stays out of `operations`; every command started after the read, by any
  /// dispatch, goes through the map's queue (and a suspension of it holds them back).
  @Test("reading a dispatch's task queue hands the map's queue out")
  func readingADispatchsTaskQueueHandsTheMapsQueueOut() async throws {
    let map = CommandMap()
    let firstInside = Latch()
    let releaseFirst = Latch()
    let first = BlockTask(async: {
      firstInside.open()
      _ = await releaseFirst.waitOpen()
    })
    map.map(OtherEvent.self) { _ in first }
    let seen = Locked<[Sighting]>([])
    Self.mapSighting(map, into: seen)
    let holding = map.dispatch(OtherEvent())
    #expect(await firstInside.waitOpen())
    #expect(map.privateQueue?.isExposed == false)
    let queue = holding.taskQueue
    #expect(queue === map.queueOfCommands)
    #expect(map.privateQueue?.isExposed == true)
    #expect(!queue.operations.contains(first))
    queue.isSuspended = true
    let later = map.dispatch(FlagAndStringEvent())
    #expect(queue.operationCount == 1)
    #expect(seen.value.isEmpty)
    queue.isSuspended = false
    try await later.run()
    releaseFirst.open()
    try await holding.run()
    #expect(seen.value.count == 1)
    #expect(seen.value.first?.current === queue)
  }

  /// A plain `Operation` command goes through the queue, whose code can read
  /// `OperationQueue.current`: from then on every dispatch's commands go through it too.
  @Test("a plain Operation command exposes the map's queue")
  func aPlainOperationCommandExposesTheQueue() async throws {
    let map = CommandMap()
    let seen = Locked<[Sighting]>([])
    let plainCurrent = Locked<OperationQueue?>(nil)
    map.map(FlagAndStringEvent.self, priority: 1) { _ in
      BlockOperation { plainCurrent.mutate { $0 = OperationQueue.current } }
    }
    Self.mapSighting(map, into: seen)
    try await map.dispatch(FlagAndStringEvent()).run()
    #expect(map.privateQueue?.isExposed == true)
    #expect(plainCurrent.value === map.queueOfCommands)
    #expect(seen.value.count == 1)
    #expect(seen.value.first?.current === map.queueOfCommands)
  }

  /// A map given a queue: every command goes through it, as always.
  @Test("a user's queue sees every command")
  func aUsersQueueSeesEveryCommand() async throws {
    let queue = OperationQueue()
    let map = CommandMap(queue: queue)
    #expect(map.privateQueue == nil)
    let seen = Locked<[Sighting]>([])
    Self.mapSighting(map, into: seen)
    for _ in 0..<5 {
      try await map.dispatch(FlagAndStringEvent()).run()
    }
    #expect(seen.value.count == 5)
    #expect(seen.value.allSatisfy { $0.current === queue && $0.inOperations })
  }

  /// Cancelling a dispatch cancels the command it started itself, and the mappings whose turn
  /// had not come are never considered; a command cancelled before it started finishes without
  /// running; on a concurrent map, every started command is cancelled.
  @Test("a dispatch's cancellation reaches the commands it started itself", arguments: [false, true])
  func cancellationIsKept(concurrent: Bool) async throws {
    let map = CommandMap(concurrent: concurrent)
    let running = Latch()
    let ran = Locked<[String]>([])
    let holds = Locked<[BlockTask]>([])
    map.map(FlagAndStringEvent.self, priority: 2) { _ in
      let hold = BlockTask(async: {
        running.open()
        try await suspendUntilCancelled()
      })
      holds.mutate { $0.append(hold) }
      return hold
    }
    let preCancelled = Locked<BlockTask?>(nil)
    map.map(FlagAndStringEvent.self, priority: 1) { _ in
      let task = BlockTask { ran.mutate { $0.append("pre-cancelled") } }
      task.cancel()
      preCancelled.mutate { $0 = task }
      return task
    }
    map.map(FlagAndStringEvent.self, block: { _ in ran.mutate { $0.append("last") } })
    let dispatch = map.dispatch(FlagAndStringEvent())
    #expect(await running.waitOpen())
    dispatch.cancel()
    await #expect(throws: (any Error).self) { try await dispatch.waitForFinish() }
    #expect(dispatch.isCancelled)
    #expect(holds.value.count == 1)
    #expect(holds.value.allSatisfy { $0.isFinished && $0.isCancelled })
    #expect(!ran.value.contains("pre-cancelled"))
    if concurrent {
      // All three started together: the last block may have run before the cancel.
      #expect(dispatch.ran.count == 3)
      #expect(preCancelled.value.map { $0.isFinished && $0.isCancelled } == true)
      #expect(dispatch.commands.allSatisfy { $0.isFinished })
    } else {
      // The later mappings' turn never came.
      #expect(ran.value.isEmpty)
      #expect(dispatch.ran.count == 1)
      #expect(dispatch.skipped.isEmpty)
      #expect(preCancelled.value == nil)
    }
    #expect(map.privateQueue?.isExposed == false)
  }
}
