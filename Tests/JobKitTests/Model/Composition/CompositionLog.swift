import Foundation
import JobKit
import JobKitTesting

/// One run of a leaf (or of a pipeline step): sequence numbers of its start and of its end.
struct RunRecord: Sendable {
  var node: Int
  var attempt: Int
  var start: Int
  var end: Int?
}

/// What a composition workflow did, in the order it happened (a sequence number per event),
/// behind one lock: runs of leaves and steps, handlers, completions, adds, drains, storms.
struct CompositionEvents {
  var sequence = 0
  var runs: [RunRecord] = []
  /// Pipeline steps, by pipeline: `(step, record)`.
  var steps: [Int: [(step: Int, record: RunRecord)]] = [:]
  /// Pipeline `onError` handler calls: `(sequence, pipeline finished already)`.
  var errorHandlers: [Int: [Int]] = [:]
  /// `completionBlock` calls per operation made for a node (`node`, `attempt`).
  var completions: [NodeAttempt: [Int]] = [:]
  /// The operations made for each node, with the sequence number when made.
  var made: [NodeAttempt: Int] = [:]
  /// The operations themselves, kept until the workflow was checked (then `drop()`).
  var operations: [NodeAttempt: Operation] = [:]
  /// Nodes handed to their container (`add`, or given to it when it was made), in order.
  var added: [Int: Int] = [:]
  /// Commands whose `CommandQueue.add` returned.
  var addReturned: [Int: Int] = [:]
  /// Per-task completions of a `CompositionJob`, by child node.
  var routed: [Int: Int] = [:]
  var allTasksFinished: [Int: Int] = [:]
  /// `onDrained` calls per queue node: the failed commands' names of each call.
  var drains: [Int: [[String]]] = [:]
  /// Storms that struck (by index in the plan), and the node of each.
  var struck: [Int: Int] = [:]
  /// Storms whose call (`cancel()`, `fail(_:)`, `cancelAll()`, `advance(by:)`) returned, with the
  /// sequence number.
  var returned: [Int: Int] = [:]
  /// Runners (dispatch or queue nodes) whose `operationCancelled()` handed their stop down to
  /// their dispatch or queue, with the sequence number when that call returned.
  var handedDown: [Int: Int] = [:]
  /// Groups a leaf added a late child to while the group was not cancelled (its `isCancelled`,
  /// read just before the `add`), with the sequence number of the latest such read: a stop
  /// reached the group only after it.
  var addedUncancelled: [Int: Int] = [:]
  /// What the root's `waitForFinish()` threw (`nil`: it returned, or it has not yet).
  var rootThrew: (any Error)?
  var violations: [String] = []
  var watched: [WeakRef] = []
  /// The objects storms act on, by node (an operation, a `CommandQueue`, a dispatch job).
  var targets: [Int: WeakRef] = [:]
  var queues: [Int: WeakRef] = [:]
  var dispatchJobs: [Int: WeakRef] = [:]
}

/// A node's operation: a retried leaf has one per attempt, every other node one (attempt 1).
struct NodeAttempt: Hashable, Sendable, CustomStringConvertible {
  var node: Int
  var attempt: Int
  var description: String { attempt == 1 ? "n\(node)" : "n\(node)#\(attempt)" }
}

/// The recorder one workflow's operations report to. Never holds its lock while calling out.
final class CompositionLog: Sendable {
  let plan: CompositionPlan
  /// The clock of the nodes with a time limit, advanced only by an `advance` storm.
  let clock = ManualClock()
  private let state = ModelLocked(CompositionEvents())

  init(plan: CompositionPlan) { self.plan = plan }

  var events: CompositionEvents { state.withLock { $0 } }

  /// Every operation made finished and ran its completion block.
  var allCompleted: Bool {
    state.withLock { events in events.made.keys.allSatisfy { events.completions[$0] != nil } }
  }

  /// Every queue that got commands had its `onDrained` called, and (if no storm struck) every
  /// failed command was reported. The last call may come after `drained()` returned (the
  /// handler runs after the queue's lock is released): the checks wait for it.
  var drainsSettled: Bool {
    state.withLock { events in
      let calm = events.struck.values.allSatisfy { $0 <= 0 }
      for node in plan.root.all {
        guard case .queue = node.kind else { continue }
        let commands = (node.children + node.late).filter { events.added[$0.id] != nil }
        guard !commands.isEmpty else { continue }
        guard let drains = events.drains[node.id] else { return false }
        guard calm else { continue }
        let reported = Set(drains.joined())
        for command in commands {
          let operation = events.operations[NodeAttempt(node: command.id, attempt: 1)]
          if (operation as? ConcurrentOperation)?.error != nil && !reported.contains("n\(command.id)") { return false }
        }
      }
      return true
    }
  }

  func violation(_ text: String) { state.withLock { $0.violations.append(text) } }

  private func next(_ events: inout CompositionEvents) -> Int {
    events.sequence += 1
    return events.sequence
  }

  // MARK: - Operations

  /// Registers `operation`, made for `node` (attempt `attempt`): names it, counts its
  /// `completionBlock` calls, and watches it for leaks. Returns it.
  @discardableResult
  func made<T: Operation>(_ operation: T, node: Int, attempt: Int = 1) -> T {
    let key = NodeAttempt(node: node, attempt: attempt)
    operation.name = "n\(node)"
    operation.completionBlock = { [weak self] in
      self?.state.withLock { events in
        let sequence = self?.next(&events) ?? 0
        events.completions[key, default: []].append(sequence)
      }
    }
    state.withLock { events in
      events.made[key] = next(&events)
      events.operations[key] = operation
      events.watched.append(WeakRef(operation, "\(key) (\(type(of: operation)))"))
      events.targets[node] = WeakRef(operation, "\(key)")
    }
    return operation
  }

  /// Drops the operations kept for the checks (the leak check follows).
  func drop() {
    let operations = state.withLock { events in
      defer { events.operations = [:] }
      return events.operations
    }
    _ = operations
  }

  func watch(_ object: AnyObject, _ label: String) {
    state.withLock { $0.watched.append(WeakRef(object, label)) }
  }

  func madeQueue(_ queue: CommandQueue, node: Int) {
    state.withLock {
      $0.queues[node] = WeakRef(queue, "CommandQueue of n\(node)")
      $0.watched.append(WeakRef(queue, "CommandQueue of n\(node)"))
    }
  }

  func madeDispatch(_ dispatch: CommandDispatch, node: Int) {
    state.withLock {
      $0.dispatchJobs[node] = WeakRef(dispatch, "CommandDispatch of n\(node)")
      $0.watched.append(WeakRef(dispatch, "CommandDispatch of n\(node)"))
    }
  }

  /// `node` was handed to its container.
  func added(_ node: Int) { state.withLock { $0.added[node] = next(&$0) } }

  /// `CommandQueue.add` of `node` returned.
  func addReturned(_ node: Int) { state.withLock { $0.addReturned[node] = next(&$0) } }

  // MARK: - Runs

  /// A leaf started: records it and returns the storms it triggers.
  func leafStarted(_ node: Int, attempt: Int) -> [(Int, StormPlan)] {
    state.withLock { events in
      if events.runs.contains(where: { $0.node == node && $0.attempt == attempt }) {
        events.violations.append("n\(node) attempt \(attempt) started twice")
      }
      events.runs.append(RunRecord(node: node, attempt: attempt, start: next(&events)))
      return claimStorms(.leafStarts(node), &events)
    }
  }

  /// A leaf is about to finish: returns the storms its end triggers (recorded by `leafEnded`).
  func leafEnding(_ node: Int) -> [(Int, StormPlan)] {
    state.withLock { claimStorms(.leafEnds(node), &$0) }
  }

  /// A leaf is about to call `operationDone`: its run ends here.
  func leafEnded(_ node: Int, attempt: Int) {
    state.withLock { events in
      let sequence = next(&events)
      if let index = events.runs.lastIndex(where: { $0.node == node && $0.attempt == attempt }) {
        events.runs[index].end = sequence
      }
    }
  }

  func stepStarted(_ pipeline: Int, step: Int) {
    state.withLock { events in
      let record = RunRecord(node: pipeline, attempt: 1, start: next(&events))
      events.steps[pipeline, default: []].append((step, record))
    }
  }

  func stepEnded(_ pipeline: Int, step: Int) {
    state.withLock { events in
      let sequence = next(&events)
      if let index = events.steps[pipeline]?.lastIndex(where: { $0.step == step }) {
        events.steps[pipeline]?[index].record.end = sequence
      }
    }
  }

  func errorHandler(_ pipeline: Int, finished: Bool) {
    if finished { violation("n\(pipeline): onError ran after the pipeline finished") }
    state.withLock { $0.errorHandlers[pipeline, default: []].append(next(&$0)) }
  }

  func routed(_ node: Int) { state.withLock { $0.routed[node, default: 0] += 1 } }
  func allTasksFinished(_ job: Int) { state.withLock { $0.allTasksFinished[job, default: 0] += 1 } }

  func drained(_ queue: Int, failures: [String]) {
    state.withLock { $0.drains[queue, default: []].append(failures) }
  }

  // MARK: - Storms

  /// The storms `trigger` fires that did not fire yet (each fires once).
  private func claimStorms(_ trigger: StormTrigger, _ events: inout CompositionEvents) -> [(Int, StormPlan)] {
    var fired: [(Int, StormPlan)] = []
    for (index, storm) in plan.storms.enumerated() where storm.trigger == trigger && events.struck[index] == nil {
      events.struck[index] = -1
      fired.append((index, storm))
    }
    return fired
  }

  func claimStartStorms() -> [(Int, StormPlan)] { state.withLock { claimStorms(.atStart, &$0) } }

  /// The storms an adder's adds trigger.
  func claimAddingStorms(_ node: Int) -> [(Int, StormPlan)] { state.withLock { claimStorms(.adding(node), &$0) } }

  /// Storm `index` strikes now: recorded before it acts, so a checked node sees it.
  func strike(_ index: Int) {
    state.withLock { $0.struck[index] = next(&$0) }
  }

  /// Storm `index`'s call returned.
  func stormReturned(_ index: Int) {
    state.withLock { $0.returned[index] = next(&$0) }
  }

  /// Runner `node`'s `operationCancelled()` handed its stop down (its call returned).
  func handedDown(_ node: Int) {
    state.withLock { $0.handedDown[node] = next(&$0) }
  }

  /// An adder read group `node` not cancelled just before adding a late child to it.
  func addingUncancelled(_ node: Int) {
    state.withLock { $0.addedUncancelled[node] = next(&$0) }
  }

  func rootThrew(_ error: any Error) { state.withLock { $0.rootThrew = error } }

  func target(_ node: Int) -> AnyObject? { state.withLock { $0.targets[node] }?.object }
  func queue(_ node: Int) -> CommandQueue? { state.withLock { $0.queues[node] }?.object as? CommandQueue }
  func dispatchJob(_ node: Int) -> CommandDispatch? {
    state.withLock { $0.dispatchJobs[node] }?.object as? CommandDispatch
  }
}
