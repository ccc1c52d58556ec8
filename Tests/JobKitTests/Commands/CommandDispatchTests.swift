import Foundation
import JobKit
import Testing

/// The rules of ``CommandMap/dispatch(_:)`` and the ``CommandDispatch`` it returns, one test
/// (or a few) per rule: matching, priority, guards, once, snapshot and failures, async use.
@Suite("CommandDispatch rules", .timeLimit(.minutes(1)))
struct CommandDispatchTests {
  // MARK: 1. Matching

  @Test("dispatch starts its job at once: it finishes without anyone running or awaiting it")
  func dispatchStartsAtOnce() async {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    #expect(await job.finishedSoon())
    #expect(event.object.string == "1")
  }

  @Test("an event nobody mapped returns a job that finishes at once, without an error")
  func unmappedEventFinishes() async throws {
    let map = CommandMap()
    map.map(OtherEvent.self) { AppendCommand("other", to: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    try await job.run()
    #expect(job.error == nil)
    #expect(job.ran.isEmpty && job.skipped.isEmpty && job.commands.isEmpty)
    #expect(event.object.string == "")
  }

  @Test("only the exact type matches: a subclass does not run its superclass's mappings")
  func exactTypeMatching() async throws {
    let map = CommandMap()
    map.map(BaseEvent.self) { AppendCommand("base", to: $0.object) }
    map.map(DerivedEvent.self) { AppendCommand("derived", to: $0.object) }
    let derived = DerivedEvent()
    try await map.dispatch(derived).run()
    #expect(derived.object.string == "derived")
    let base = BaseEvent()
    try await map.dispatch(base).run()
    #expect(base.object.string == "base")
  }

  @Test("an event passed as an existential matches its dynamic type")
  func existentialEventMatches() async throws {
    let map = CommandMap()
    map.map(FlagAndStringEvent.self) { AppendCommand("1", to: $0.object) }
    let event = FlagAndStringEvent()
    let erased: any Sendable = event
    let job = map.dispatch(erased)
    try await job.run()
    #expect(event.object.string == "1")
    #expect(job.event is FlagAndStringEvent)
  }

  // MARK: 2. Priority

  @Test("higher priority first, equal priorities in mapping order; the report lists that order")
  func priorityThenMappingOrder() async throws {
    let map = CommandMap()
    let order: [(String, Int)] = [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", -1)]
    var mapped: [String: CommandMapping] = [:]
    for (text, priority) in order {
      mapped[text] = map.map(FlagAndStringEvent.self, priority: priority) { AppendCommand(text, to: $0.object) }
    }
    let expected = ["b", "d", "a", "c", "e"].map { mapped[$0]! }
    #expect(map.mappings(for: FlagAndStringEvent.self) == expected)
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    try await job.run()
    #expect(event.object.string == "bdace")
    #expect(job.ran == expected)
    #expect(job.commands.map { ($0 as? AppendCommand)?.text } == ["b", "d", "a", "c", "e"])
  }

  @Test("commands of one dispatch run one after another: each sees the ones before it finished")
  func sequentialByDefault() async throws {
    let map = CommandMap()
    let log = EventLog()
    map.map(FlagAndStringEvent.self, priority: 1) { DelayedAppendCommand.append1Async($0.object) }
    map.map(FlagAndStringEvent.self) { event in
      ClosureCommand { log.record("second saw '\(event.object.string)'") }
    }
    try await map.dispatch(FlagAndStringEvent()).run()
    #expect(log.all == ["second saw '1_async'"])
  }

  @Test("a concurrent map starts the commands of one dispatch together")
  func concurrentMapRunsTogether() async throws {
    let map = CommandMap(concurrent: true)
    #expect(map.isConcurrent)
    let gate = Gate()
    // The first command waits for the second to open its gate: run one after another, this
    // dispatch could never finish.
    map.map(FlagAndStringEvent.self, priority: 1) { GatedCommand("first", gate: gate, object: $0.object) }
    map.map(FlagAndStringEvent.self) { _ in ClosureCommand { gate.open() } }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    try await job.run()
    #expect(event.object.string == "first")
    #expect(job.ran.count == 2)
  }

  @Test("dispatched commands and blocks run on the map's queue", arguments: [false, true])
  func commandsRunOnTheMapsQueue(concurrent: Bool) async throws {
    let queue = OperationQueue()
    queue.name = "map queue"
    let map = CommandMap(queue: queue, concurrent: concurrent)
    #expect(map.queue === queue)
    let seen = Locked<[String]>([])
    map.map(FlagAndStringEvent.self, priority: 1) { _ in
      ClosureCommand { seen.mutate { $0.append("command: \(OperationQueue.current?.name ?? "none")") } }
    }
    map.map(
      FlagAndStringEvent.self,
      block: { _ in
        seen.mutate { $0.append("block: \(OperationQueue.current?.name ?? "none")") }
      })
    let last = ManualTask("last")
    map.map(FlagAndStringEvent.self, priority: -1) { _ in last }
    let job = map.dispatch(FlagAndStringEvent())
    // While the last command runs, it occupies a slot of the map's queue.
    #expect(await last.startedLatch.opened())
    #expect(queue.operations.contains { $0 === last })
    last.finish()
    try await job.run()
    #expect(Set(seen.value) == ["command: map queue", "block: map queue"])
  }

  @Test("a serial map queue runs one command at a time; dispatches start their first commands in dispatch order")
  func serialQueueRunsOneCommandAtATime() async throws {
    let queue = OperationQueue.serial()
    let map = CommandMap(queue: queue)
    let log = EventLog()
    let running = Locked(0)
    let overlapped = Locked(false)
    @Sendable func step(_ name: String) -> ClosureCommand {
      ClosureCommand {
        let now = running.mutate {
          $0 += 1
          return $0
        }
        if now > 1 { overlapped.mutate { $0 = true } }
        log.record(name)
        running.mutate { $0 -= 1 }
      }
    }
    let gate = Gate()
    map.map(FlagAndStringEvent.self, priority: 1) { GatedCommand("A1", gate: gate, object: $0.object, log: log) }
    map.map(FlagAndStringEvent.self) { _ in step("A2") }
    map.map(OtherEvent.self, priority: 1) { _ in step("B1") }
    map.map(OtherEvent.self) { _ in step("B2") }
    let first = map.dispatch(FlagAndStringEvent())
    let second = map.dispatch(OtherEvent())
    gate.open()
    try await second.run()
    try await first.run()
    let order = log.all
    #expect(!overlapped.value)
    #expect(order.count == 5)
    func index(_ name: String) -> Int { order.firstIndex(of: name) ?? -1 }
    #expect(index("start A1") == 0 && index("finish A1") == 1)
    #expect(index("B1") > index("finish A1"))  // queued behind A1 at dispatch time
    #expect(index("A2") > index("finish A1") && index("B2") > index("B1"))
  }

  // MARK: 3. Guards

  @Test("guards are asked in order, asking stops at the first refusal, the command is not created")
  func guardsInOrderStopAtFirstRefusal() async throws {
    let map = CommandMap()
    let log = EventLog()
    let created = Locked(0)
    let mapping = map.map(
      FlagAndStringEvent.self,
      guards: [
        { _ in
          log.record("g0")
          return true
        },
        { _ in
          log.record("g1")
          return false
        },
        { _ in
          log.record("g2")
          return true
        },
      ]
    ) { event in
      created.mutate { $0 += 1 }
      return AppendCommand("1", to: event.object)
    }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    #expect(log.all == ["g0", "g1"])  // asked before dispatch returned
    try await job.run()
    #expect(created.value == 0)
    #expect(job.ran.isEmpty)
    #expect(job.skipped == [CommandDispatch.Skip(mapping, .guardRefused(index: 1))])
    #expect(event.object.string == "")
  }

  // MARK: 4. Once

  @Test("a once mapping refused by a guard stays mapped, and is removed after it ran")
  func onceKeptWhenRefused() async throws {
    let map = CommandMap()
    let asked = Locked(0)
    let mapping = map.map(
      FlagAndStringEvent.self, once: true,
      guards: [
        { _ in
          asked.mutate {
            $0 += 1
            return $0
          } > 1
        }
      ]
    ) { AppendCommand("1", to: $0.object) }
    let event = FlagAndStringEvent()

    let refused = map.dispatch(event)
    try await refused.run()
    #expect(refused.skipped == [CommandDispatch.Skip(mapping, .guardRefused(index: 0))])
    #expect(map.mappings(for: FlagAndStringEvent.self) == [mapping])

    let ran = map.dispatch(event)
    try await ran.run()
    #expect(ran.ran == [mapping])
    #expect(map.mappings(for: FlagAndStringEvent.self).isEmpty)

    try await map.dispatch(event).run()
    #expect(event.object.string == "1")
    #expect(asked.value == 2)
  }

  @Test("two racing dispatches: the one that claims the once mapping first runs it, the other reports alreadyUsed")
  func onceClaimRace() async {
    let map = CommandMap()
    let inGuard = Latch()
    let proceed = Latch()
    let asked = Locked(0)
    let mapping = map.map(
      FlagAndStringEvent.self, once: true,
      guards: [
        { _ in
          // The first dispatch holds in its guard until the second one ran the mapping.
          if asked.mutate({
            $0 += 1
            return $0
          }) == 1 {
            inGuard.open()
            proceed.wait()
          }
          return true
        }
      ]
    ) { AppendCommand("1", to: $0.object) }
    let event = FlagAndStringEvent()
    let first = Locked<CommandDispatch?>(nil)
    let firstReturned = Latch()
    // On a thread of its own: its guard blocks until this test opens `proceed` (see `onThread`).
    Thread {
      let job = map.dispatch(event)
      first.mutate { $0 = job }
      firstReturned.open()
    }.start()
    #expect(await inGuard.waitOpen())
    let second = map.dispatch(event)
    proceed.open()
    #expect(await firstReturned.waitOpen())
    let firstJob = first.value!
    #expect(second.ran == [mapping])
    #expect(firstJob.ran.isEmpty)
    #expect(firstJob.skipped == [CommandDispatch.Skip(mapping, .alreadyUsed)])
    #expect(await second.finishedSoon())
    #expect(await firstJob.finishedSoon())
    #expect(event.object.string == "1")
  }

  @Test("racing dispatches on two threads never run a once mapping twice")
  func onceUnderRacingThreads() async {
    let map = CommandMap()
    for _ in 0..<300 {
      let runs = Locked(0)
      map.map(FlagAndStringEvent.self, once: true) { _ in runs.mutate { $0 += 1 } }
      let jobs = Locked<[CommandDispatch]>([])
      await concurrently(2) { _ in
        let job = map.dispatch(FlagAndStringEvent())
        jobs.mutate { $0.append(job) }
      }
      for job in jobs.value { #expect(await job.finishedSoon()) }
      #expect(runs.value == 1)
      #expect(jobs.value.map(\.ran.count).reduce(0, +) == 1)
    }
  }

  // MARK: 6. Snapshot and failures

  @Test("mappings added or removed during a dispatch do not change it; the next dispatch sees them")
  func dispatchWorksOnASnapshot() async throws {
    let map = CommandMap()
    let later = Locked<[CommandMapping]>([])
    let firstTime = Locked(true)
    map.map(
      FlagAndStringEvent.self, priority: 10,
      guards: [
        { _ in
          guard firstTime.exchange(false) else { return true }
          for mapping in later.value { map.unmap(mapping) }
          map.map(FlagAndStringEvent.self) { AppendCommand("N", to: $0.object) }
          return true
        }
      ]
    ) { AppendCommand("A", to: $0.object) }
    let plain = map.map(FlagAndStringEvent.self, priority: 1) { AppendCommand("B", to: $0.object) }
    let once = map.map(FlagAndStringEvent.self, once: true) { AppendCommand("O", to: $0.object) }
    later.mutate { $0 = [plain, once] }

    let first = FlagAndStringEvent()
    try await map.dispatch(first).run()
    #expect(first.object.string == "ABO")

    let second = FlagAndStringEvent()
    try await map.dispatch(second).run()
    #expect(second.object.string == "AN")
  }

  @Test(
    "a failing command makes the dispatch report its error; the other mappings still run", arguments: [false, true])
  func failureDoesNotStopOthers(concurrent: Bool) async throws {
    let map = CommandMap(concurrent: concurrent)
    map.map(FlagAndStringEvent.self, priority: 1) { _ in InstantTask("fails", failure: TestError(1)) }
    map.map(FlagAndStringEvent.self) { AppendCommand("2", to: $0.object) }
    let event = FlagAndStringEvent()
    let job = map.dispatch(event)
    let failure = try #require(await #expect(throws: JobFailures.self) { try await job.run() })
    #expect(failure.failures.count == 1)
    #expect(failure.failures.first?.group == "InstantTask")
    #expect(failure.failures.first?.error as? TestError == TestError(1))
    #expect((job.error as? JobFailures)?.failures.count == 1)
    #expect(event.object.string == "2")
    // Another dispatch is unaffected.
    let next = map.dispatch(OtherEvent())
    try await next.run()
  }

  @Test("cancelling a dispatch's job cancels its commands; the ones not started never run")
  func cancelDispatch() async throws {
    let map = CommandMap()
    let running = ManualTask("running")
    let started = Locked(false)
    map.map(FlagAndStringEvent.self, priority: 1) { _ in running }
    map.map(FlagAndStringEvent.self) { _ in ClosureCommand { started.mutate { $0 = true } } }
    let job = map.dispatch(FlagAndStringEvent())
    #expect(await running.startedLatch.waitOpen())
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(running.cancelHookCalls == 1)
    #expect(!started.value)
  }

  // MARK: 7. Async and re-entrancy

  @Test("a command can dispatch on its own map and wait for that dispatch without blocking")
  func commandDispatchesOnItsMap() async throws {
    let map = CommandMap()
    map.map(OtherEvent.self) { AppendCommand("inner", to: $0.object) }
    map.map(FlagAndStringEvent.self) { [unowned map] event in
      AwaitingDispatchCommand { map.dispatch(OtherEvent(event.object)) }
    }
    let event = FlagAndStringEvent()
    try await map.dispatch(event).run()
    #expect(event.object.string == "inner")
  }

  @Test("dispatching from a job callback does not deadlock")
  func dispatchFromJobCallback() async throws {
    let map = CommandMap(queue: OperationQueue.serial())
    map.map(OtherEvent.self) { AppendCommand("inner", to: $0.object) }
    let object = FlagAndString()
    let inner = Locked<[CommandDispatch]>([])
    final class Relay: JobController, @unchecked Sendable {
      // @unchecked Sendable: immutable after init.
      let body: @Sendable () -> Void
      init(_ body: @escaping @Sendable () -> Void) {
        self.body = body
        super.init()
      }
      override func main() {
        trackAndQueue(ClosureCommand()) { [body] _ in body() }
      }
      override func allTasksFinished() { body() }
    }
    let relay = Relay { inner.mutate { $0.append(map.dispatch(OtherEvent(object))) } }
    try await relay.run()
    for job in inner.value { try await job.run() }
    #expect(inner.value.count == 2)
    #expect(object.string == "innerinner")
  }
}
