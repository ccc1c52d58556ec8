import Foundation
import JobKitTesting
import Testing

@testable import JobKit

@Suite("Group stress")
struct GroupStressTests {
  /// Invariant: 1,000 tasks, finishing inline or later on other threads, run in the order added.
  @Test func aThousandTasksKeepTheirOrder() async throws {
    let log = EventLog()
    var generator = SeededGenerator(seed: 7)
    let steps = (0..<1_000).map { index in
      Step("\(index)", log: log, finish: Bool.random(using: &generator) ? .inline : .later)
    }
    try await SequentialGroup(steps).run()
    #expect(log.all == (0..<1_000).map { "\($0)" })
  }

  /// Invariant: tasks added from 4 threads while the group runs all run once, one at a time, each
  /// thread's tasks in the order that thread added them.
  @Test func addsFromManyThreadsWhileRunningKeepEachThreadsOrder() async throws {
    let log = EventLog()
    let first = ManualTask("first")
    let group = SequentialGroup([first])
    let running = Locked(0)
    let overlaps = Locked(0)
    group.startJob()
    #expect(await first.startedLatch.opened())
    await concurrently(4) { thread in
      for index in 0..<250 {
        group.add(
          BlockTask {
            if running.mutate({ value -> Int in
              value += 1
              return value
            }) > 1 {
              overlaps.mutate { $0 += 1 }
            }
            log.record("\(thread).\(index)")
            running.mutate { $0 -= 1 }
          })
      }
    }
    first.finish()
    try await group.run()
    #expect(overlaps.value == 0)
    let events = log.all
    #expect(events.count == 1_000)
    for thread in 0..<4 {
      #expect(events.filter { $0.hasPrefix("\(thread).") } == (0..<250).map { "\(thread).\($0)" })
    }
  }

  /// Invariant: an `add` racing the group's end either runs (and the group waits for it) or is
  /// reported as added after the finish and never starts; never anything in between.
  @Test(arguments: GroupKind.allCases)
  func addsRacingTheGroupsEnd(kind: GroupKind) async throws {
    var accepted = 0
    var rejected = 0
    for _ in 0..<300 {
      let group = kind.make([InstantTask()])
      QuietMisuse.silence(group)
      let late = Step("late", log: EventLog(), finish: .later)
      let added = Latch()
      group.startJob()
      DispatchQueue.global().async {
        group.add(late)
        added.open()
      }
      try await group.run()
      #expect(await added.opened())
      if group.misuses.isEmpty {
        accepted += 1
        #expect(late.isFinished)  // the group waited for it
      } else {
        rejected += 1
        #expect(group.misuses == [JobKitError(.trackedAfterJobFinished)])
        #expect(!late.isExecuting && !late.isFinished)
      }
    }
    #expect(accepted + rejected == 300)
  }

  /// Invariant: a cancel racing task finishes and adds finishes the group exactly once; every task
  /// added before the group finished finishes, cancelled if it never started; later adds are
  /// reported.
  @Test(arguments: [21 as UInt64, 22])
  func cancelRacingFinishesAndAdds(seed: UInt64) async throws {
    for kind in GroupKind.allCases {
      var generator = SeededGenerator(seed: seed)
      let tasks = (0..<400).map { ManualTask("\($0)", finishesOnCancel: Bool.random(using: &generator)) }
      let group = kind.make(Array(tasks[..<200]))
      QuietMisuse.silence(tasks)
      QuietMisuse.silence(group)
      let finishCount = Locked(0)
      group.completionBlock = { finishCount.mutate { $0 += 1 } }
      group.startJob()
      let order = tasks.shuffled(using: &generator)
      let cancelAt = Int.random(in: 0..<400, using: &generator)
      await concurrently(3) { worker in
        switch worker {
        case 0:
          for task in tasks[200...] { group.add(task) }
        case 1:
          for (index, task) in order.enumerated() where index.isMultiple(of: 2) {
            if task.didStart { task.finish() }
            if index == cancelAt { group.cancel() }
          }
        default:
          group.cancel()
        }
      }
      // End every started task (one may start just after the cancel); the others were cancelled
      // and finish by themselves.
      repeat {
        for task in tasks where task.didStart && !task.isFinished { task.finish() }
      } while await !group.finishedSoon(within: 0.05)
      await #expect(throws: CancellationError.self) { try await group.run() }
      // A task added after the cancelled group finished is reported and left alone; every other
      // task finishes, and one that never started was cancelled.
      let rejected = tasks.filter { !$0.didStart && !$0.isCancelled }
      #expect(group.misuses.filter { $0 == JobKitError(.trackedAfterJobFinished) }.count == rejected.count)
      for task in tasks where !rejected.contains(where: { $0 === task }) {
        #expect(task.isFinished)
      }
      // Foundation runs the completionBlock on a global queue after the finish.
      #expect(await eventually { finishCount.value == 1 })
      group.completionBlock = nil
    }
  }
}
