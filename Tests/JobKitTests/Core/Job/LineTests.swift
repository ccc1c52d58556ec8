import Foundation
import Testing

@testable import JobKit

/// `Line` on its own, no threads: order, compaction, removal, and that a taken element is let go.
@Suite("Line")
struct LineTests {
  @Test func tasksComeOutOldestFirstAcrossCompactions() {
    var pending = Line<Operation>()
    let tasks = (0..<6000).map { _ in BlockOperation() }
    var taken: [Operation] = []
    // Interleave adding and taking so the line compacts (after 1024 taken) while it still holds some.
    for (index, task) in tasks.enumerated() {
      pending.append(task)
      if index % 3 == 2, let first = pending.popFirst() {
        taken.append(first)
      }
    }
    while let next = pending.popFirst() {
      taken.append(next)
    }
    #expect(pending.isEmpty)
    #expect(taken.count == tasks.count)
    #expect(zip(taken, tasks).allSatisfy { $0 === $1 })
  }

  /// One in, one out (a job's finished tasks): the line empties each time and starts over at the
  /// front of its storage only every `emptyResetSlots` taken slots, in order throughout.
  @Test func aLineEmptiedOneAtATimeKeepsItsOrder() {
    var line = Line<Operation>()
    let tasks = (0..<(3 * Line<Operation>.emptyResetSlots + 5)).map { _ in BlockOperation() }
    for (index, task) in tasks.enumerated() {
      line.append(task)
      if index % 2 == 1 {
        line.append(tasks[index - 1])
        let first = line.popFirst()
        #expect(first === task)
      }
      let next = line.popFirst()
      #expect(next === (index % 2 == 1 ? tasks[index - 1] : task) && line.isEmpty && line.count == 0)
    }
    #expect(line.popFirst() == nil && line.all.isEmpty)
  }

  @Test func removeAllReturnsWhatIsLeftInOrder() {
    var pending = Line<Operation>()
    let tasks = (0..<100).map { _ in BlockOperation() }
    for task in tasks {
      pending.append(task)
    }
    for _ in 0..<70 {
      _ = pending.popFirst()
    }
    let rest = pending.removeAll()
    #expect(rest.count == 30)
    #expect(zip(rest, tasks[70...]).allSatisfy { $0 === $1 })
    #expect(pending.isEmpty)
    #expect(pending.popFirst() == nil)
  }

  /// A sequential group's finished task must not live on in the line it waited in.
  @Test func aTakenTaskIsNotKeptAlive() {
    var pending = Line<Operation>()
    weak var first: BlockOperation?
    do {
      let task = BlockOperation()
      first = task
      pending.append(task)
    }
    pending.append(BlockOperation())
    pending.append(BlockOperation())
    #expect(first != nil)
    _ = pending.popFirst()
    #expect(first == nil)
    #expect(!pending.isEmpty)
  }

  /// A task that leaves the line early (it finished while it waited) keeps the others' order.
  @Test func removingOneKeepsTheOthersInOrder() {
    var line = Line<Operation>()
    let tasks = (0..<5).map { _ in BlockOperation() }
    for task in tasks { line.append(task) }
    _ = line.popFirst()
    line.removeFirst { $0 === tasks[2] }
    #expect(!line.contains(tasks[2]) && line.contains(tasks[3]) && line.count == 3)
    #expect(zip(line.all, [tasks[1], tasks[3], tasks[4]]).allSatisfy { $0 === $1 })
  }
}
