import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A command or group task that records how often its work ran and, through a meter, how many
/// ran at once. Its work finishes inline or on a global queue (`later`), ignoring a cancel.
private final class CountedTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `runs` and `meter` are thread-safe.
  let runs = Locked(0)
  let meter: ConcurrencyMeter
  let later: Bool

  init(meter: ConcurrencyMeter, later: Bool) {
    self.meter = meter
    self.later = later
    super.init()
  }

  override func operationStart() {
    runs.mutate { $0 += 1 }
    meter.enter()
    if later {
      DispatchQueue.global().async { [self] in
        meter.leave()
        operationDone()
      }
    } else {
      meter.leave()
      operationDone()
    }
  }
}

/// Runs `bodies` at once, each on a thread of its own released by one barrier, and suspends
/// until all returned.
private func race(_ bodies: [@Sendable () -> Void]) async {
  await concurrently(bodies.count, barrier: true) { bodies[$0]() }
}

/// Issue 23, items 2 to 4, under random races from a seeded generator: every task added to a
/// group or command added to a queue either runs exactly once or is cancelled, and finishes
/// before its container does; a sequential queue runs one command at a time; `drained()`
/// returns only once every command added before it finished.
@Suite("Containers: add versus stop, stress", .timeLimit(.minutes(5)))
struct ContainerAddStopStressTests {
  /// Threads add tasks to a running group (one that tracks a running task of its own, so a
  /// sequential group's first added task starts from the adding thread) while another cancels
  /// it. Each accepted task runs at most once, a task that did not run was cancelled, and every
  /// accepted task finished by the time the group did. Rejected adds (after the finish) change
  /// nothing.
  @Test(arguments: GroupKind.allCases)
  func addsRacingACancelAreNeverLost(kind: GroupKind) async {
    var random = ModelRandom(seed: kind == .sequential ? 23 : 2323)
    for round in 0..<2_000 {
      let running = ManualTask("running", finishesOnCancel: true)
      let group = kind.make()
      QuietMisuse.silence(group)
      group.trackAndQueue(running)
      group.startJob()
      #expect(await running.startedLatch.opened())
      let meter = ConcurrencyMeter()
      let adders = Int.random(in: 1...2, using: &random)
      let perAdder = Int.random(in: 1...6, using: &random)
      let tasks = (0..<adders * perAdder).map { _ in CountedTask(meter: meter, later: Bool.random(using: &random)) }
      let accepted = Locked([Bool](repeating: false, count: tasks.count))
      let spin = Int.random(in: 0..<200, using: &random)
      var bodies: [@Sendable () -> Void] = (0..<adders).map { adder in
        {
          for index in adder * perAdder..<(adder + 1) * perAdder {
            let wasAccepted = group.addTask(tasks[index], reportingRejection: true)
            accepted.mutate { $0[index] = wasAccepted }
          }
        }
      }
      bodies.append {
        var x = 0
        for i in 0..<spin { x &+= i }
        if x >= 0 { group.cancel() }
      }
      await race(bodies)
      #expect(await group.finishedSoon(within: 20), "round \(round): the group did not finish")
      let unfinished = tasks.indices.filter { accepted.value[$0] && !tasks[$0].isFinished }
      #expect(unfinished.isEmpty, "round \(round): accepted tasks \(unfinished) unfinished after the group")
      for (index, task) in tasks.enumerated() where accepted.value[index] {
        #expect(task.runs.value <= 1 && (task.runs.value == 1 || task.isCancelled), "round \(round), task \(index)")
      }
      let lost = group.misuses.filter { $0.code == .trackedAfterJobFinished && "\($0)".contains("was tracked after") }
      #expect(lost.isEmpty, "round \(round): \(lost)")
      if !unfinished.isEmpty || !lost.isEmpty { return }
    }
  }

  /// Threads add commands to a queue while others pause, resume and `cancelAll()` it, at random.
  /// Then the queue is resumed and drained: every command finished, ran at most once, was
  /// cancelled if it did not run; a sequential queue never ran two at once.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func commandsRacingPauseResumeAndCancelAllAreNeverLost(mode: CommandQueue.Mode) async {
    var random = ModelRandom(seed: mode == .sequential ? 2_300 : 2_301)
    let queue = CommandQueue(mode: mode)
    for round in 0..<1_500 {
      let meter = ConcurrencyMeter()
      let count = Int.random(in: 1...8, using: &random)
      let commands = (0..<count).map { _ in CountedTask(meter: meter, later: Bool.random(using: &random)) }
      let split = Int.random(in: 0...count, using: &random)
      let controls = (0..<Int.random(in: 1...3, using: &random)).map { _ in Int.random(in: 0..<3, using: &random) }
      var bodies: [@Sendable () -> Void] = [
        { for command in commands[..<split] { queue.add(command) } },
        { for command in commands[split...] { queue.add(command) } },
      ]
      bodies.append {
        for control in controls {
          switch control {
          case 0: queue.pause()
          case 1: queue.resume()
          default: queue.cancelAll()
          }
        }
      }
      bodies.append { queue.resume() }
      await race(bodies)
      queue.resume()
      let drainedAll = Task { () -> [Int] in
        await queue.drained()
        return commands.indices.filter { !commands[$0].isFinished }
      }
      let unfinished = await drainedAll.value
      #expect(unfinished.isEmpty, "round \(round): drained() returned before commands \(unfinished) finished")
      for (index, command) in commands.enumerated() {
        let runs = command.runs.value
        #expect(runs <= 1 && (runs == 1 || command.isCancelled), "round \(round), command \(index): \(runs) runs")
      }
      if mode == .sequential {
        #expect(meter.most <= 1, "round \(round): \(meter.most) commands ran at once")
      }
      if !unfinished.isEmpty || (mode == .sequential && meter.most > 1) { return }
    }
  }
}
