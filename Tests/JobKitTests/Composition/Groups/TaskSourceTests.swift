import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Watches the tasks a group takes from a sequence: how many the sequence made, how many run
/// now, the most that ran at once, and how often each ran. Tasks made with `finishesAtOnce: false`
/// run until the test releases them (oldest first).
final class SourceProbe: Sendable {
  private struct Counts {
    var made = 0
    var running = 0
    var mostRunning = 0
    var runs: [Int: Int] = [:]
    var waiting: [ProbeTask] = []
  }

  private let counts = Locked(Counts())

  /// The task the sequence makes as its element `index` (counted as made).
  func make(_ index: Int, finishesAtOnce: Bool = true, failure: (any Error)? = nil) -> ProbeTask {
    counts.mutate { $0.made += 1 }
    return ProbeTask(index: index, probe: self, finishesAtOnce: finishesAtOnce, failure: failure)
  }

  var made: Int { counts.value.made }
  var running: Int { counts.value.running }
  var mostRunning: Int { counts.value.mostRunning }
  /// How many times each element ran, by index.
  var runs: [Int: Int] { counts.value.runs }

  fileprivate func started(_ task: ProbeTask, waits: Bool) {
    counts.mutate { counts in
      counts.running += 1
      counts.mostRunning = max(counts.mostRunning, counts.running)
      counts.runs[task.index, default: 0] += 1
      if waits { counts.waiting.append(task) }
    }
  }

  /// Counted before the task finishes, so a successor started after the finish never overlaps it.
  fileprivate func finishing(_ task: ProbeTask) {
    counts.mutate { counts in
      counts.running -= 1
      counts.waiting.removeAll { $0 === task }
    }
  }

  /// Finishes the oldest waiting task; `false` if none waits.
  @discardableResult
  func releaseOldest() -> Bool {
    guard let task = counts.mutate({ $0.waiting.first }) else { return false }
    task.finish()
    return true
  }
}

/// A task made by a ``SourceProbe``.
final class ProbeTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `probe` is thread-safe.
  let index: Int
  private let probe: SourceProbe
  private let finishesAtOnce: Bool
  private let failure: (any Error)?
  private let finishOnce = Locked(false)

  init(index: Int, probe: SourceProbe, finishesAtOnce: Bool, failure: (any Error)?) {
    self.index = index
    self.probe = probe
    self.finishesAtOnce = finishesAtOnce
    self.failure = failure
    super.init()
  }

  override func operationStart() {
    probe.started(self, waits: !finishesAtOnce)
    if finishesAtOnce { finish() }
  }

  override func operationCancelled() {
    finish()
  }

  func finish() {
    let isFirst = finishOnce.mutate { done -> Bool in
      guard !done else { return false }
      done = true
      return true
    }
    guard isFirst else { return }
    probe.finishing(self)
    operationDone(error: failure)
  }
}

@Suite("ConcurrentGroup taking a sequence")
struct ConcurrentGroupSourceTests {
  @Test(arguments: [1, 3, 64])
  func runsEveryTaskOfTheSequenceExactlyOnce(maxRunning: Int) async throws {
    let probe = SourceProbe()
    let group = ConcurrentGroup(taking: (0..<500).lazy.map { probe.make($0) }, maxRunning: maxRunning)
    try await group.run()
    #expect(probe.made == 500)
    #expect(probe.runs == Dictionary(uniqueKeysWithValues: (0..<500).map { ($0, 1) }))
    #expect(probe.mostRunning <= maxRunning)
  }

  /// The tasks run until released one by one: `maxRunning` of them run at once, never more, the
  /// sequence is asked for a task only when a slot is free, and the group finishes only after
  /// the sequence is exhausted.
  @Test func runsAtMostMaxRunningAtOnceAndFinishesOnlyWhenTheSequenceIsExhausted() async throws {
    let probe = SourceProbe()
    let count = 12
    let group = ConcurrentGroup(
      taking: (0..<count).lazy.map { probe.make($0, finishesAtOnce: false) }, maxRunning: 3)
    group.startJob()
    for released in 0..<count {
      let expected = min(3, count - released)
      #expect(await eventually { probe.running == expected })
      #expect(probe.made == min(count, released + 3))
      #expect(!group.isFinished)
      #expect(probe.releaseOldest())
    }
    try await group.run()
    #expect(probe.mostRunning == 3)
    #expect(probe.made == count && probe.runs.count == count)
  }

  /// A cancel stops the taking: no element is made after it, and the group finishes cancelled.
  @Test func cancelStopsTakingAndFinishesCancelled() async throws {
    let probe = SourceProbe()
    let group = ConcurrentGroup(
      taking: (0..<1_000).lazy.map { probe.make($0, finishesAtOnce: false) }, maxRunning: 2)
    group.startJob()
    #expect(await eventually { probe.running == 2 })
    #expect(probe.releaseOldest())  // one slot turns over before the cancel
    #expect(await eventually { probe.running == 2 && probe.made == 3 })
    group.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(group.isCancelled && group.error == nil)
    #expect(probe.made == 3 && probe.running == 0)
  }

  @Test func collectsEveryFailure() async throws {
    let probe = SourceProbe()
    let group = ConcurrentGroup(
      taking: (0..<10).lazy.map { probe.make($0, failure: $0 % 3 == 0 ? TestError($0) : nil) }, maxRunning: 2)
    await #expect(throws: JobFailures.self) { try await group.run() }
    let failures = try #require(group.error as? JobFailures).failures
    #expect(Set(failures.compactMap { ($0.error as? TestError)?.id }) == [0, 3, 6, 9])
    #expect(probe.runs.count == 10)
  }

  @Test func anEmptySequenceFinishesAtOnce() async throws {
    let group = ConcurrentGroup(taking: [BlockTask]())
    try await group.run()
    #expect(group.isFinished && group.error == nil && group.misuses.isEmpty)
  }

  @Test func aMaxRunningBelowOneIsReportedAndOneIsUsed() async throws {
    let probe = SourceProbe()
    let group = ConcurrentGroup(taking: (0..<50).lazy.map { probe.make($0) }, maxRunning: 0)
    QuietMisuse.silence(group)
    try await group.run()
    #expect(group.misuses == [JobKitError(.invalidLimit)])
    #expect(probe.runs.count == 50 && probe.mostRunning == 1)
  }

  /// Tasks added with `add(_:)`, before and while the group runs, run alongside the sequence's.
  @Test func addedTasksRunAlongsideTheSequence() async throws {
    let probe = SourceProbe()
    let log = EventLog()
    let group = ConcurrentGroup(taking: (0..<20).lazy.map { probe.make($0, finishesAtOnce: false) }, maxRunning: 2)
    group.add(BlockTask { log.record("before") })
    group.startJob()
    #expect(await eventually { probe.running == 2 })
    group.add(BlockTask { log.record("while") })
    #expect(await eventually { log.all.count == 2 })
    for _ in 0..<20 {
      #expect(await eventually { probe.releaseOldest() })
    }
    try await group.run()
    #expect(Set(log.all) == ["before", "while"] && probe.runs.count == 20 && probe.mostRunning == 2)
  }

  @Test func aTaskTheSequenceMakesTwiceWhileInTheGroupIsReportedAndRunsOnce() async throws {
    let probe = SourceProbe()
    let twice = probe.make(0, finishesAtOnce: false)
    let group = ConcurrentGroup(taking: [twice, twice, probe.make(1)], maxRunning: 2)
    QuietMisuse.silence(group)
    group.startJob()
    // Both started (a run is counted at its start): finishing `twice` before it started would
    // skip its run (seen under ThreadSanitizer).
    #expect(await eventually { probe.runs[1] == 1 && probe.runs[0] == 1 })
    #expect(!twice.isFinished)
    twice.finish()
    try await group.run()
    #expect(group.misuses == [JobKitError(.taskAlreadyTracked)])
    #expect(probe.runs == [0: 1, 1: 1])
  }

  @Test func everyTaskGetsTheGroupsContext() async throws {
    let probes = Locked<[ContextProbe]>([])
    let group = ConcurrentGroup(
      taking: (0..<5).lazy.map { _ in
        let probe = ContextProbe()
        probes.mutate { $0.append(probe) }
        return probe
      })
    try await group.run()
    #expect(probes.value.count == 5 && probes.value.allSatisfy { $0.seen === group.context })
  }

  /// Nested: each task taken is itself a group taking its tasks from a sequence.
  @Test func nestedGroupsTakingSequencesRunEveryTask() async throws {
    let runs = Locked(0)
    let group = ConcurrentGroup(
      taking: (0..<10).lazy.map { _ in
        SequentialGroup(taking: (0..<10).lazy.map { _ in BlockTask { runs.mutate { $0 += 1 } } })
      }, maxRunning: 3)
    try await group.run()
    #expect(runs.value == 100)
  }

  /// The group releases the sequence (and whatever it holds) once it finished, though the group
  /// itself lives on.
  @Test func releasesTheSequenceOnceFinished() async throws {
    final class Token: Sendable {}
    let tracker = ReleaseTracker()
    let group: ConcurrentGroup = {
      let token = Token()
      tracker.watch(token, "the sequence's token")
      return ConcurrentGroup(taking: (0..<3).lazy.map { _ in withExtendedLifetime(token) { BlockTask {} } })
    }()
    try await group.run()
    #expect(await tracker.survivors().isEmpty)
    withExtendedLifetime(group) {}
  }
}

@Suite("SequentialGroup taking a sequence")
struct SequentialGroupSourceTests {
  @Test func runsTheSequenceInOrderOneAtATimeThenTheAddedTasks() async throws {
    let log = EventLog()
    let made = Locked(0)
    let group = SequentialGroup(
      taking: (0..<100).lazy.map { index in
        made.mutate { $0 += 1 }
        return Step("\(index)", log: log, finish: index % 2 == 0 ? .inline : .later)
      })
    group.add(Step("added", log: log))
    try await group.run()
    #expect(log.all == (0..<100).map { "\($0)" } + ["added"])
    #expect(made.value == 100)
  }

  @Test func makesTheNextTaskOnlyAfterThePreviousOneFinished() async throws {
    let probe = SourceProbe()
    let group = SequentialGroup(taking: (0..<5).lazy.map { probe.make($0, finishesAtOnce: false) })
    group.startJob()
    for released in 0..<5 {
      #expect(await eventually { probe.running == 1 })
      #expect(probe.made == released + 1 && !group.isFinished)
      #expect(probe.releaseOldest())
    }
    try await group.run()
    #expect(probe.mostRunning == 1 && probe.runs.count == 5)
  }

  /// With `stopsOnFailure`, the first failure ends the taking: later elements are never made.
  @Test func aStopOnFailureStopsTaking() async throws {
    let probe = SourceProbe()
    let group = SequentialGroup(
      taking: (0..<10).lazy.map { probe.make($0, failure: $0 == 3 ? TestError(3) : nil) })
    group.stopsOnFailure = true
    await #expect(throws: TestError(3)) { try await group.run() }
    #expect(probe.made == 4 && probe.runs.count == 4)
  }

  @Test func cancelStopsTaking() async throws {
    let probe = SourceProbe()
    let group = SequentialGroup(taking: (0..<10).lazy.map { probe.make($0, finishesAtOnce: false) })
    group.startJob()
    #expect(await eventually { probe.running == 1 })
    group.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(probe.made == 1)
  }
}
