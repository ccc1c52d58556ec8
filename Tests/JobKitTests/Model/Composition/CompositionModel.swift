import Foundation
import JobKit

/// How an operation of a composition tree ended.
enum CompositionOutcome: Hashable, Sendable, CustomStringConvertible {
  case success
  case cancelled
  /// `ModelError(spec: node)`: the leaf or pipeline step failed.
  case failed(Int)
  /// `StormError(node:)`: the node was stopped with `fail(_:)`.
  case storm(Int)
  /// `JobFailures` (a group, job or dispatch) or `QueueFailures` (a queue), with the count.
  case failures(Int)
  /// `JobKitError.timeLimitExceeded` of the node whose limit is this many seconds.
  case timeLimit(Int)
  case other(String)

  init(_ operation: Operation) {
    let error = (operation as? ConcurrentOperation)?.error
    switch error {
    case nil: self = operation.isCancelled ? .cancelled : .success
    case let error? where CompositionReasons.limitSeconds(of: error) != nil:
      self = .timeLimit(CompositionReasons.limitSeconds(of: error) ?? 0)
    case let error as ModelError: self = .failed(error.spec)
    case let error as StormError: self = .storm(error.node)
    case let error as JobFailures: self = .failures(error.failures.count)
    case let error as QueueFailures: self = .failures(error.count)
    case let error?: self = .other(String(describing: error))
    }
  }

  var description: String {
    switch self {
    case .success: return "success"
    case .cancelled: return "cancelled"
    case .failed(let node): return "ModelError(n\(node))"
    case .storm(let node): return "StormError(n\(node))"
    case .failures(let count): return "\(count) failure(s)"
    case .timeLimit(let seconds): return "timeLimitExceeded(\(seconds) s)"
    case .other(let text): return "other(\(text))"
    }
  }
}

/// What the documented rules predict for one node, given the storms that struck.
struct NodeExpectation {
  /// A storm struck the node or a container above it (or an earlier sibling may have stopped
  /// its stop-on-failure group): it may be cancelled, and need not run.
  var disturbed: Bool
  /// After a certain failure in its stop-on-failure group: never runs.
  var skipped: Bool
  /// Undisturbed and reached: must be made, run (or started) and finish as `allowed` says.
  var mustRun: Bool
  var allowed: Set<CompositionOutcome>
  /// Whether its container may count it, or must count it, as failed.
  var mayFail: Bool
  var mustFail: Bool
  /// The errors a stop-on-failure container may take from it.
  var failTags: Set<CompositionOutcome>
}

/// The reference model: predictions from the plan, the storms that struck, and the documented
/// rules of groups, pipelines, jobs, command queues and dispatches.
struct CompositionModel {
  let plan: CompositionPlan
  /// The nodes a cancel, fail or cancelAll storm struck or whose time limit ran out; the nodes
  /// a fail storm struck; the nodes whose time limit ran out.
  let stopped: Set<Int>
  let failed: Set<Int>
  let expired: Set<Int>
  private(set) var expectations: [Int: NodeExpectation] = [:]

  /// - Parameter expired: the nodes that failed with their own time limit (their
  ///   `timeLimitExceeded`): a limit is one more way to fail a job, like a fail storm; whether it
  ///   ran out when it had to, and only then, is `CompositionReasonChecks`' concern.
  init(plan: CompositionPlan, struck: Set<Int>, expired: Set<Int> = []) {
    self.plan = plan
    var stopped: Set<Int> = expired
    var failed: Set<Int> = []
    self.expired = expired
    for index in struck {
      switch plan.storms[index].action {
      case .cancel(let node), .cancelAll(let node), .cancelReason(let node): stopped.insert(node)
      case .fail(let node):
        stopped.insert(node)
        failed.insert(node)
      case .pause, .suspend, .advance: break
      }
    }
    // A node that ends cancelled, not by its parent, cancels a parent group (issue 20: a task
    // that cancels itself cancels its group), and so on up: a cancel storm may stop every group
    // above its target up to the first container that is not a group (a job, a queue, a
    // dispatch), which keeps routing.
    let parents = plan.parents
    let nodes = plan.nodes
    for index in struck {
      var id: Int
      switch plan.storms[index].action {
      case .cancel(let target), .cancelReason(let target): id = target
      default: continue
      }
      while let parent = parents[id], let kind = nodes[parent]?.kind, kind.propagatesCancellation {
        stopped.insert(parent)
        id = parent
      }
    }
    self.stopped = stopped
    self.failed = failed
    _ = expect(plan.root, disturbedAbove: false, skipped: false, reached: true)
  }

  private mutating func expect(_ node: NodePlan, disturbedAbove: Bool, skipped: Bool, reached: Bool)
    -> NodeExpectation
  {
    let disturbed = disturbedAbove || stopped.contains(node.id)
    var stormTags: Set<CompositionOutcome> = failed.contains(node.id) ? [.storm(node.id)] : []
    if expired.contains(node.id), let limit = node.timeLimit { stormTags.insert(.timeLimit(limit)) }
    var result: NodeExpectation
    switch node.kind {
    case .leaf(let spec):
      var fails = spec.fails
      // A stop can end a retried leaf after any attempt: then a failed earlier one is its last.
      var mayFail = spec.fails
      if case .retry(let failing, let maxAttempts) = node.tracking {
        fails = failing >= maxAttempts
        mayFail = fails || (disturbed && failing > 0)
      }
      let timesOut = spec.finish == .untilCancelled
      var allowed: Set<CompositionOutcome> = timesOut ? [.cancelled] : [fails ? .failed(node.id) : .success]
      if disturbed { allowed.insert(.cancelled) }
      if mayFail { allowed.insert(.failed(node.id)) }
      result = NodeExpectation(
        disturbed: disturbed, skipped: skipped, mustRun: false, allowed: allowed, mayFail: mayFail || timesOut,
        mustFail: (fails || timesOut) && !disturbed, failTags: mayFail ? [.failed(node.id)] : [])
    case .pipeline(_, let failingStep, _):
      let normal: CompositionOutcome = failingStep == nil ? .success : .failed(node.id)
      result = NodeExpectation(
        disturbed: disturbed, skipped: skipped, mustRun: false,
        allowed: disturbed ? [normal, .cancelled] : [normal], mayFail: failingStep != nil,
        mustFail: failingStep != nil && !disturbed, failTags: failingStep == nil ? [] : [.failed(node.id)])
    default:
      result = container(node, disturbed: disturbed, skipped: skipped, reached: reached)
      result.allowed.formUnion(stormTags)
      result.failTags.formUnion(stormTags)
      if !stormTags.isEmpty { result.mayFail = true }
    }
    if skipped {
      result.allowed = stormTags.union([.cancelled])
      result.mayFail = false
      result.mustFail = false
    }
    result.mustRun = reached && !disturbed && !skipped
    expectations[node.id] = result
    return result
  }

  private mutating func container(_ node: NodePlan, disturbed: Bool, skipped: Bool, reached: Bool)
    -> NodeExpectation
  {
    var stopsOnFailure = false
    if case .sequential(let stops, _) = node.kind { stopsOnFailure = stops }
    var children: [NodeExpectation] = []
    var skipRest = skipped
    var disturbRest = disturbed
    for child in node.children {
      let expectation = expect(child, disturbedAbove: disturbRest, skipped: skipRest, reached: reached && !skipRest)
      children.append(expectation)
      if stopsOnFailure && expectation.mustFail { skipRest = true }
      if stopsOnFailure && expectation.mayFail { disturbRest = true }
    }
    // Late children are added by a leaf child while it runs: reached only if it surely ran.
    let adder = node.children.firstIndex {
      if case .leaf(let spec) = $0.kind { return spec.addsLate } else { return false }
    }
    let adderRuns = adder.map { children[$0].mustRun } ?? false
    for child in node.late {
      let expectation = expect(
        child, disturbedAbove: disturbRest || !adderRuns, skipped: skipRest, reached: reached && adderRuns && !skipRest)
      children.append(expectation)
      if stopsOnFailure && expectation.mustFail { skipRest = true }
      if stopsOnFailure && expectation.mayFail { disturbRest = true }
    }
    let mayCount = children.filter(\.mayFail).count
    let mustCount = children.filter(\.mustFail).count
    var allowed: Set<CompositionOutcome> = []
    var failTags: Set<CompositionOutcome> = []
    if stopsOnFailure {
      for child in children where child.mayFail { failTags.formUnion(child.failTags) }
      allowed = failTags
      if mustCount == 0 || disturbed { allowed.insert(.success) }
    } else {
      failTags = Set((max(1, disturbed ? 1 : mustCount)...max(1, mayCount)).map { .failures($0) })
      if mayCount > 0 { allowed = failTags }
      if mustCount == 0 || disturbed { allowed.insert(.success) }
    }
    if disturbed { allowed.insert(.cancelled) }
    return NodeExpectation(
      disturbed: disturbed, skipped: skipped, mustRun: false, allowed: allowed, mayFail: mayCount > 0,
      mustFail: mustCount > 0 && !disturbed, failTags: mayCount > 0 ? failTags : [])
  }
}
