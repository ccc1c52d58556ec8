import Foundation
import Testing

@testable import JobKit

/// `JobAdmission` alone, fed on one thread with nodes of a job that never starts and a queue
/// nothing is added to: each waiting task sits in the line of what it waits for (its turn, the
/// resume, a slot of its type), every line keeps its order, and a freed slot visits its own
/// type's line only. (Mutating calls stay out of `#expect`.)
@Suite("JobAdmission lines")
struct JobAdmissionLinesTests {
  private final class Alpha: BlockOperation, @unchecked Sendable {}
  private final class Beta: BlockOperation, @unchecked Sendable {}

  private let job = JobController()
  private let queue = OperationQueue()

  private func node(of entry: TaskTypeEntry) -> TaskNode {
    let task: Operation = entry.type == Alpha.self ? Alpha() : Beta()
    return TaskNode(job: job, task: task, group: entry)
  }

  /// A type entry with a limit of `limit`, `running` of whose slots are taken.
  private func entry(_ type: Operation.Type, limit: Int, running: Int = 0) -> TaskTypeEntry {
    let entry = TaskTypeEntry(type: type)
    entry.setLimit(limit)
    for _ in 0..<running {
      entry.giveSlot(to: TaskNode(job: job, task: BlockOperation(), group: entry))
    }
    return entry
  }

  @Test func eachTypeHasItsOwnLineInOrder() {
    var admission = JobAdmission()
    let alpha = entry(Alpha.self, limit: 1, running: 1)
    let beta = entry(Beta.self, limit: 2, running: 2)
    let alphas = (0..<3).map { _ in node(of: alpha) }
    let betas = (0..<3).map { _ in node(of: beta) }
    for (a, b) in zip(alphas, betas) {
      admission.waitForSlot(a, of: alpha, for: queue)
      admission.waitForSlot(b, of: beta, for: queue)
    }
    #expect(admission.waitingForSlot(of: alpha) == 3 && admission.waitingForSlot(of: beta) == 3)
    #expect(alphas.allSatisfy { $0.state.waits(for: .slot) })
    // No room: nothing leaves, nothing is visited.
    let none = admission.admitWaiting(of: alpha)
    #expect(none.isEmpty && admission.slotVisits == 0)

    beta.freeSlot()
    beta.freeSlot()
    let admitted = admission.admitWaiting(of: beta)
    #expect(admitted.map { ObjectIdentifier($0.node) } == betas.prefix(2).map(ObjectIdentifier.init))
    #expect(admitted.allSatisfy { $0.queue === queue && $0.node.state.isUnfinished })
    #expect(beta.running == 2 && admission.waitingForSlot(of: alpha) == 3 && admission.slotVisits == 2)
  }

  /// The shape a single scanned line would make quadratic: 10,000 tasks of a full type wait in
  /// front of another type's tasks. Each of the other type's 200 freed slots visits exactly the
  /// one task it admits (a single line would visit 10,000 per slot: 2,000,000 in all).
  @Test func aFreedSlotVisitsOnlyItsOwnTypesLine() {
    var admission = JobAdmission()
    let alpha = entry(Alpha.self, limit: 1, running: 1)
    let beta = entry(Beta.self, limit: 1, running: 1)
    for _ in 0..<10_000 {
      admission.waitForSlot(node(of: alpha), of: alpha, for: queue)
    }
    let betas = (0..<200).map { _ in node(of: beta) }
    for node in betas {
      admission.waitForSlot(node, of: beta, for: queue)
    }
    var order: [ObjectIdentifier] = []
    for _ in betas {
      beta.freeSlot()
      let admitted = admission.admitWaiting(of: beta)
      order += admitted.map { ObjectIdentifier($0.node) }
    }
    #expect(order == betas.map(ObjectIdentifier.init))
    #expect(admission.slotVisits == 200)
    #expect(admission.waitingForSlot(of: alpha) == 10_000 && admission.waitingForSlot(of: beta) == 0)
  }

  /// A task that finished while waiting for a slot (queued by someone else) leaves its own
  /// type's line; the others keep their order.
  @Test func aTaskLeavesItsLineAndTheOthersKeepTheirOrder() {
    var admission = JobAdmission()
    let alpha = entry(Alpha.self, limit: 1, running: 1)
    let nodes = (0..<3).map { _ in node(of: alpha) }
    for node in nodes {
      admission.waitForSlot(node, of: alpha, for: queue)
    }
    let release = nodes[1].finish()
    #expect(release?.leftLine == .slot && release?.slot == false)
    admission.leave(nodes[1], .slot)
    alpha.freeSlot()
    let first = admission.admitWaiting(of: alpha)
    alpha.freeSlot()
    let second = admission.admitWaiting(of: alpha)
    #expect((first + second).map { ObjectIdentifier($0.node) } == [nodes[0], nodes[2]].map(ObjectIdentifier.init))
  }

  /// Tasks waiting for the resume are handed back in the order they came; one that finished
  /// meanwhile stays listed (it does not leave a line on its finish) and no longer waits.
  @Test func theResumeLineKeepsItsOrder() {
    var admission = JobAdmission()
    let alpha = TaskTypeEntry(type: Alpha.self)
    let nodes = (0..<3).map { _ in node(of: alpha) }
    for node in nodes {
      admission.waitForResume(node, for: queue)
    }
    let release = nodes[0].finish()
    #expect(release?.leftLine == nil)
    #expect(admission.waitingForResume == 3)
    let line = admission.takeResumeLine()
    #expect(line.map(ObjectIdentifier.init) == nodes.map(ObjectIdentifier.init))
    let queues = line.map { $0.stopWaiting(for: .resume) }
    #expect(queues[0] == nil && queues[1] === queue && queues[2] === queue)
    #expect(admission.waitingForResume == 0)
  }

  /// The turn line: closed until opened, then one at a time in order for a sequential group.
  @Test func theTurnLineLetsOneGoAtATimeInOrder() {
    var admission = JobAdmission()
    admission.activate(.oneAtATime, blocked: false)
    let alpha = TaskTypeEntry(type: Alpha.self)
    let nodes = (0..<3).map { _ in node(of: alpha) }
    for node in nodes {
      node.wait(for: .turn, on: queue)
      let leaves = admission.enter(node, stopping: false)
      #expect(!leaves)
    }
    let closed = admission.next()
    #expect(closed == nil && admission.waitingForTurn == 3)
    admission.open()
    var order: [ObjectIdentifier] = []
    for node in nodes {
      let next = admission.next()
      let blocked = admission.next()
      #expect(next?.queue === queue && blocked == nil)
      order += next.map { [ObjectIdentifier($0.node)] } ?? []
      let done = admission.done(node.operation)
      #expect(done)
    }
    #expect(order == nodes.map(ObjectIdentifier.init))
  }
}
