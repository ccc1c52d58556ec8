import Foundation
import Testing

@testable import JobKit

/// `PendingTasks` on its own, no threads: order, compaction, and that a taken task is let go.
@Suite("PendingTasks")
struct PendingTasksTests {
  @Test func tasksComeOutOldestFirstAcrossCompactions() {
    var pending = PendingTasks()
    let tasks = (0..<300).map { _ in BlockOperation() }
    var taken: [Operation] = []
    // Interleave adding and taking so the line compacts (after 64 taken) while it still holds some.
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

  @Test func removeAllReturnsWhatIsLeftInOrder() {
    var pending = PendingTasks()
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
    var pending = PendingTasks()
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
}
