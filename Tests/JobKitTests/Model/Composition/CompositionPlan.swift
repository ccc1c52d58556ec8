/// When a composition leaf finishes.
enum LeafFinish: Sendable, CustomStringConvertible {
  /// Inside `operationStart()`.
  case atOnce
  /// From a global dispatch queue, soon after it started.
  case later
  /// From a thread of its own.
  case onThread
  /// Only when cancelled (by its job's timeout); generated only under a job's timeout.
  case untilCancelled

  var description: String {
    switch self {
    case .atOnce: return "now"
    case .later: return "later"
    case .onThread: return "thread"
    case .untilCancelled: return "untilCancelled"
    }
  }
}

/// A leaf: a `ConcurrentOperation` (`CompositionLeaf`, or `LimitedLeaf` for a job's limit).
struct LeafSpec: Sendable {
  var finish: LeafFinish
  var fails: Bool
  /// Finishes at once when cancelled while it runs (else it runs to its end).
  var honorsCancel: Bool
  /// A `LimitedLeaf`, counted against its job's limit.
  var limited = false
  /// Adds its parent's `late` children (from another thread) before it finishes.
  var addsLate = false
}

/// How a `CompositionJob` tracks a child.
enum JobTracking: Sendable, CustomStringConvertible {
  /// `trackAndQueue(_:completion:)`.
  case queued
  /// `trackAndQueue(retrying:_:completion:)` of a leaf whose first `failing` attempts fail.
  case retry(failing: Int, maxAttempts: Int)
  /// `trackAndQueue(_:timeout:completion:)`; a generous timeout unless the leaf runs until cancelled.
  case timeout(milliseconds: Int)

  var description: String {
    switch self {
    case .queued: return "q"
    case .retry(let failing, let maxAttempts): return "retry \(failing)/\(maxAttempts)"
    case .timeout(let milliseconds): return "timeout \(milliseconds)ms"
    }
  }
}

/// What a node of a composition tree is.
enum NodeKind: Sendable {
  case leaf(LeafSpec)
  /// `SequentialGroup(children)` or `SequentialGroup(taking:)`.
  case sequential(stopsOnFailure: Bool, taking: Bool)
  /// `ConcurrentGroup(children)`, or `ConcurrentGroup(taking:maxRunning:)` if `takingMax` is set.
  case concurrent(takingMax: Int?)
  /// A `Pipeline<Int>` of `steps` steps (no children); `failingStep` throws.
  case pipeline(steps: Int, failingStep: Int?, asyncSteps: Bool)
  /// A `CompositionJob` (a `JobController` subclass, policy `.collect`) tracking its children
  /// from `main()`, with a limit on its `LimitedLeaf`s if set.
  case job(limit: Int?)
  /// A `CommandQueue` run by a `QueueRunner` operation: its children are added as commands
  /// (the first `pausedAdds` of them while paused), the runner finishes after `drained()`.
  case queue(sequential: Bool, pausedAdds: Int)
  /// A `CommandMap` dispatch run by a `DispatchRunner`: each child is a mapping's command.
  case dispatch(concurrent: Bool)

  var isContainer: Bool {
    if case .leaf = self { return false }
    if case .pipeline = self { return false }
    return true
  }

  /// Groups, which a child that ended cancelled (not by them) cancels (issue 20).
  var propagatesCancellation: Bool {
    switch self {
    case .sequential, .concurrent: return true
    default: return false
    }
  }

  /// Containers whose children (commands, steps) must run one at a time.
  var isSequential: Bool {
    switch self {
    case .sequential: return true
    case .queue(let sequential, _): return sequential
    case .dispatch(let concurrent): return !concurrent
    case .pipeline: return true
    default: return false
    }
  }
}

/// One node of a generated composition tree.
struct NodePlan: Sendable {
  var id: Int
  var kind: NodeKind
  var children: [NodePlan] = []
  /// Children added later, from another thread, by the leaf child whose `addsLate` is set.
  var late: [NodePlan] = []
  /// How the parent tracks this node, when the parent is a `.job`.
  var tracking: JobTracking = .queued
  /// The `timeLimit` of a job or group node, in seconds of the workflow's `ManualClock` (no two
  /// nodes of a workflow have the same limit, so a `timeLimitExceeded` message names its node).
  var timeLimit: Int?

  /// The node and every node below it (`late` ones included), in pre-order.
  var all: [NodePlan] { [self] + (children + late).flatMap(\.all) }
}

/// Something a storm does.
enum StormAction: Sendable, Equatable, CustomStringConvertible {
  /// `cancel()` on the node's operation (a runner's cancel cancels its queue or dispatch).
  case cancel(Int)
  /// `fail(StormError)` on a job node (a group, a job, a dispatch).
  case fail(Int)
  /// `cancelAll()` on a queue node's `CommandQueue`.
  case cancelAll(Int)
  /// `pause()`, then `resume()` after `yields` yields, on a queue node's `CommandQueue`.
  case pause(Int)
  /// `suspend()`, then `resume()` after `yields` yields, on the node's operation.
  case suspend(Int)
  /// `cancel(reason: ReasonError(node:))` on the node's operation.
  case cancelReason(Int)
  /// `advance(by: .seconds(n))` on the workflow's `ManualClock` (the clock of the nodes with a
  /// time limit); targets no node (`target` is -1).
  case advance(Int)

  var target: Int {
    switch self {
    case .cancel(let id), .fail(let id), .cancelAll(let id), .pause(let id), .suspend(let id), .cancelReason(let id):
      return id
    case .advance: return -1
    }
  }

  var description: String {
    switch self {
    case .cancel(let id): return "cancel n\(id)"
    case .fail(let id): return "fail n\(id)"
    case .cancelAll(let id): return "cancelAll n\(id)"
    case .pause(let id): return "pause n\(id)"
    case .suspend(let id): return "suspend n\(id)"
    case .cancelReason(let id): return "cancel(reason:) n\(id)"
    case .advance(let seconds): return "advance \(seconds) s"
    }
  }
}

/// When a storm strikes.
enum StormTrigger: Sendable, Equatable, CustomStringConvertible {
  /// Right after the root was queued, racing its start.
  case atStart
  /// When leaf `id` starts.
  case leafStarts(Int)
  /// When leaf `id` is about to finish.
  case leafEnds(Int)
  /// When leaf `id` (an adder) begins adding its group's late children, racing the adds.
  case adding(Int)

  var description: String {
    switch self {
    case .atStart: return "at start"
    case .leafStarts(let id): return "when n\(id) starts"
    case .leafEnds(let id): return "when n\(id) ends"
    case .adding(let id): return "when n\(id) adds"
    }
  }
}

/// A stop or pause made by the test while the workflow runs.
struct StormPlan: Sendable, CustomStringConvertible {
  var action: StormAction
  var trigger: StormTrigger
  /// On the triggering thread (inside the leaf) instead of another thread.
  var inline: Bool
  /// `sched_yield()`s before striking (and, for a pause, before resuming).
  var yields: Int

  var description: String { "\(action) \(trigger)\(inline ? " inline" : "") +\(yields)" }
}

/// A generated composition workflow: one tree and its storms.
struct CompositionPlan: Sendable {
  var seed: UInt64
  var root: NodePlan
  var storms: [StormPlan]
  /// The features the generator used (for the failure summary).
  var features: Set<CompositionFeature>

  /// Every node by id.
  var nodes: [Int: NodePlan] { Dictionary(uniqueKeysWithValues: root.all.map { ($0.id, $0) }) }

  /// Every node's parent id.
  var parents: [Int: Int] {
    var result: [Int: Int] = [:]
    for node in root.all {
      for child in node.children + node.late { result[child.id] = node.id }
    }
    return result
  }
}
