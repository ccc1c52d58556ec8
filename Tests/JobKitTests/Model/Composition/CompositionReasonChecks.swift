import Foundation
import JobKit

/// Why an operation was stopped (its `cancellationReason`), as the reason checks compare it.
enum ReasonTag: Hashable, Comparable, CustomStringConvertible {
  /// `CancellationError`: a plain `cancel()`.
  case plain
  /// `ReasonError(node:)`: a `cancelReason` storm on that node.
  case reason(Int)
  /// `StormError(node:)`: a fail storm on that node.
  case storm(Int)
  /// `timeLimitExceeded` of that node's time limit.
  case limit(Int)
  /// `JobKitError.timedOut`: a task's own timeout.
  case timedOut
  /// `ModelError(spec:)`: that leaf or pipeline failed (a stop-on-failure group's reason).
  case failed(Int)
  /// `JobFailures` or `QueueFailures` (a stop-on-failure group's reason).
  case failures
  case other(String)

  var description: String {
    switch self {
    case .plain: return "CancellationError"
    case .reason(let node): return "ReasonError(n\(node))"
    case .storm(let node): return "StormError(n\(node))"
    case .limit(let node): return "timeLimitExceeded(n\(node))"
    case .timedOut: return "timedOut"
    case .failed(let node): return "ModelError(n\(node))"
    case .failures: return "failures"
    case .other(let text): return "other(\(text))"
    }
  }
}

/// Reading the errors of a composition workflow.
enum CompositionReasons {
  /// The seconds of the time limit a `timeLimitExceeded` error names ("… ran out of its time
  /// limit of 3.0 seconds"), or `nil` if `error` is not one.
  static func limitSeconds(of error: any Error) -> Int? {
    guard let error = error as? JobKitError, error.code == .timeLimitExceeded,
      let range = error.message.range(of: "time limit of ")
    else { return nil }
    return Double(error.message[range.upperBound...].prefix { $0.isNumber || $0 == "." }).map { Int($0) }
  }

  static func tag(_ error: any Error, plan: CompositionPlan) -> ReasonTag {
    if let seconds = limitSeconds(of: error) {
      return plan.root.all.first { $0.timeLimit == seconds }.map { .limit($0.id) } ?? .other("limit \(seconds) s")
    }
    switch error {
    case is CancellationError: return .plain
    case let error as ReasonError: return .reason(error.node)
    case let error as StormError: return .storm(error.node)
    case let error as ModelError: return .failed(error.spec)
    case is JobFailures, is QueueFailures: return .failures
    case let error as JobKitError where error.code == .timedOut: return .timedOut
    default: return .other(String(describing: error))
    }
  }

  /// The nodes that failed with their own time limit.
  static func expired(_ plan: CompositionPlan, _ events: CompositionEvents) -> Set<Int> {
    Set(
      plan.root.all.filter { node in
        guard let limit = node.timeLimit,
          let error = (events.operations[NodeAttempt(node: node.id, attempt: 1)] as? ConcurrentOperation)?.error
        else { return false }
        return limitSeconds(of: error) == limit
      }.map(\.id))
  }
}

/// The checks of cancellation reasons and time limits (issue 33), once a composition workflow
/// finished: every operation's `cancellationReason` is one a stop at it or above it (through
/// jobs and groups, which hand their reason down) can give it, and among time limits that ran
/// out, that of the smallest one on its path; a limit runs out only when the clock passed it,
/// and surely does when its subtree was running then and nothing else stopped it; each node on
/// the running path then has that limit's reason; nothing made after a stop reached a job or
/// group runs below it; the root's `waitForFinish()` throws its error or its reason.
///
/// The clock is a `ManualClock` only an `advance` storm moves, once, by `seconds`: a limit of
/// `L` s may run out if `L <= seconds`, and surely does when the storm struck inline as a leaf
/// below the limited node started (the node was running since before, its timer armed at 0).
struct CompositionReasonChecks {
  private struct Limit {
    var node: Int
    var seconds: Int
    /// The node was surely running when the clock passed its limit.
    var due: Bool
  }

  let plan: CompositionPlan
  let events: CompositionEvents
  /// The nodes whose own time limit ran out.
  let expired: Set<Int>
  /// How many operations had a reason to check; how many nodes were checked on the running
  /// path of a limit that ran out (for the test's summary: shows the checks had work).
  private(set) var reasonsChecked = 0
  private(set) var runningPathChecks = 0
  /// The advance storm that struck: its seconds and its index.
  private var advance: (seconds: Int, index: Int)?
  /// The nodes surely running when the clock advanced: the inline trigger leaf and those above.
  private var running: Set<Int> = []
  /// Groups a struck cancel storm below may have cancelled, with the storm's reason (a task that
  /// cancels itself cancels its group with its reason, and so on up).
  private var cancelledFromBelow: [Int: Set<ReasonTag>] = [:]
  private(set) var violations: [String] = []

  init(plan: CompositionPlan, events: CompositionEvents) {
    self.plan = plan
    self.events = events
    expired = CompositionReasons.expired(plan, events)
    let parents = plan.parents
    let nodes = plan.nodes
    for (index, storm) in plan.storms.enumerated() where (events.struck[index] ?? 0) > 0 {
      switch storm.action {
      case .advance(let seconds):
        advance = (seconds, index)
        if storm.inline, case .leafStarts(var id) = storm.trigger {
          running.insert(id)
          while let parent = parents[id] {
            running.insert(parent)
            id = parent
          }
        }
      case .cancel(var id), .cancelReason(var id):
        let reason: ReasonTag = if case .cancelReason(let target) = storm.action { .reason(target) } else { .plain }
        while let parent = parents[id], let kind = nodes[parent]?.kind, kind.propagatesCancellation {
          cancelledFromBelow[parent, default: []].insert(reason)
          id = parent
        }
      default: break
      }
    }
    visit(plan.root, inherited: [], limits: [])
    checkRoot()
    checkNothingRunsAfterStops()
  }

  private func tag(_ error: any Error) -> ReasonTag { CompositionReasons.tag(error, plan: plan) }

  private func operations(of node: NodePlan) -> [(NodeAttempt, ConcurrentOperation)] {
    events.operations.compactMap { key, operation in
      guard key.node == node.id, let operation = operation as? ConcurrentOperation else { return nil }
      return (key, operation)
    }.sorted { $0.0.attempt < $1.0.attempt }
  }

  /// The reasons a stop at `node` itself gives (to it, or to what it hands them down to).
  private func own(_ node: NodePlan) -> Set<ReasonTag> {
    var tags = cancelledFromBelow[node.id] ?? []
    for (index, storm) in plan.storms.enumerated() where (events.struck[index] ?? 0) > 0 {
      switch storm.action {
      case .cancel(node.id), .cancelAll(node.id): tags.insert(.plain)
      case .cancelReason(node.id): tags.insert(.reason(node.id))
      case .fail(node.id): tags.insert(.storm(node.id))
      default: break
      }
    }
    if case .timeout = node.tracking { tags.insert(.timedOut) }
    if case .sequential(true, _) = node.kind {
      // A stop-on-failure group fails with its child's error, which its other tasks then see.
      for child in node.children + node.late {
        for (_, operation) in operations(of: child) { if let error = operation.error { tags.insert(tag(error)) } }
      }
    }
    return tags
  }

  private mutating func visit(_ node: NodePlan, inherited: Set<ReasonTag>, limits: [Limit]) {
    var path = limits
    if let limit = node.timeLimit, let advance, limit <= advance.seconds {
      path.append(Limit(node: node.id, seconds: limit, due: running.contains(node.id)))
    }
    // Of the limits that ran out on the path, the one that ran out first stops everything below
    // it: not later than the smallest due one.
    let dueFirst = path.filter(\.due).map(\.seconds).min() ?? Int.max
    let limitTags = Set(path.filter { $0.seconds <= dueFirst }.map { ReasonTag.limit($0.node) })
    let others = inherited.union(own(node))
    let allowed = others.union(limitTags)
    let operations = operations(of: node)
    for (key, operation) in operations {
      guard let reason = operation.cancellationReason else { continue }
      reasonsChecked += 1
      let found = tag(reason)
      if !allowed.contains(found) {
        violations.append("\(key): cancellationReason \(found); the model allows \(allowed.sorted())")
      }
    }
    let first = path.min { $0.seconds < $1.seconds }
    if running.contains(node.id), let first, first.due, others.isEmpty,
      let (key, operation) = operations.last.map({ $0 })
    {
      let found = operation.cancellationReason.map(tag)
      runningPathChecks += 1
      if found != .limit(first.node) {
        violations.append(
          "\(key) ran when the clock passed n\(first.node)'s limit (\(first.seconds) s), nothing else stopped it,"
            + " yet its cancellationReason is \(found.map(\.description) ?? "nil")")
      }
    }
    if expired.contains(node.id) && !path.contains(where: { $0.node == node.id }) {
      violations.append(
        "n\(node.id): its time limit (\(node.timeLimit ?? 0) s) ran out, yet the clock advanced"
          + " \(advance.map { "\($0.seconds) s" } ?? "never")")
    }
    if let first, first.node == node.id, first.due, others.isEmpty, !expired.contains(node.id) {
      violations.append(
        "n\(node.id): its time limit (\(first.seconds) s) ran out while it ran and nothing else stopped it, yet"
          + " it ended \(operations.last.map { CompositionOutcome($0.1) }.map(\.description) ?? "unmade")")
    }
    // A queue's runner cancels its commands with `cancelAll()`, which gives no reason.
    var isQueue = false
    if case .queue = node.kind { isQueue = true }
    for child in node.children + node.late {
      if isQueue {
        visit(child, inherited: allowed.isEmpty ? [] : [.plain], limits: [])
      } else {
        visit(child, inherited: allowed, limits: path)
      }
    }
  }

  /// `waitForFinish()` on the root throws its error, or, if it was cancelled, its reason.
  private mutating func checkRoot() {
    guard let operation = events.operations[NodeAttempt(node: plan.root.id, attempt: 1)] as? ConcurrentOperation,
      operation.isFinished
    else { return }
    var expected: (any Error)? = operation.error
    if let error = expected, error is CancellationError, let reason = operation.cancellationReason {
      expected = reason
    }
    if expected == nil && operation.isCancelled { expected = operation.cancellationReason ?? CancellationError() }
    let thrown = events.rootThrew.map(tag)
    if thrown != expected.map(tag) {
      violations.append(
        "n\(plan.root.id): waitForFinish() threw \(thrown.map(\.description) ?? "nothing"), the root ended with"
          + " \(expected.map(tag)?.description ?? "no error")")
    }
  }

  /// Nothing made after a stop of a job or group returned runs below it (through jobs and
  /// groups, which cancel what they track once stopped; a queue takes commands after a
  /// `cancelAll()`).
  /// The stopped nodes of an advance are those it gave a limit's reason to. A job stops what it
  /// tracks before the advance returns; below a runner (a dispatch or queue node, a plain
  /// `ConcurrentOperation`) the stop goes on only when the runner's `operationCancelled()` hands
  /// it down, which waits for its `operationStart()` to return: there it counts from then.
  /// A stop that finds the node stopping already returns at once, maybe before the first stop
  /// (from another thread) handed itself down to the groups below: below a group it counts
  /// from when the stop reached that group, not before an adder read the group not cancelled
  /// just before adding to it (an add to a running group, which runs).
  private mutating func checkNothingRunsAfterStops() {
    let nodes = plan.nodes
    for (index, storm) in plan.storms.enumerated() {
      guard let returned = events.returned[index] else { continue }
      var stopped: [(node: Int, returned: Int)] = []
      switch storm.action {
      case .cancel(let id), .cancelReason(let id), .fail(let id): stopped = [(id, returned)]
      case .advance:
        stopped = plan.root.all.compactMap { node in
          let limits = operations(of: node).compactMap { _, operation -> Int? in
            guard case .limit(let limited)? = operation.cancellationReason.map(tag) else { return nil }
            return limited
          }
          return limits.first.map { (node.id, stopReached(node.id, from: $0, advanceReturned: returned)) }
        }
      default: continue
      }
      // Only a job or a group stops what it tracks: a cancelled leaf's job still retries it.
      for (id, returned) in stopped {
        guard let node = nodes[id] else { continue }
        switch node.kind {
        case .job, .sequential, .concurrent:
          checkNothingRuns(below: node, after: returned, stop: "\(storm) reached n\(id)")
        default: continue
        }
      }
    }
  }

  /// When the stop of `limited`'s time limit (an advance that returned at `advanceReturned`)
  /// reached `node`: the latest of that return and of the hand-downs of the runners between them.
  private func stopReached(_ node: Int, from limited: Int, advanceReturned: Int) -> Int {
    let parents = plan.parents
    let nodes = plan.nodes
    var reached = advanceReturned
    var id = node
    while id != limited, let parent = parents[id] {
      switch nodes[parent]?.kind {
      case .dispatch?, .queue?: reached = max(reached, events.handedDown[parent] ?? advanceReturned)
      default: break
      }
      id = parent
    }
    return reached
  }

  private mutating func checkNothingRuns(below node: NodePlan, after returned: Int, stop: String) {
    for (key, made) in events.made where key.node == node.id && made > returned {
      let runs = events.runs.filter { $0.node == key.node && $0.attempt == key.attempt }.count
      let steps = events.steps[key.node]?.count ?? 0
      if runs + steps > 0 { violations.append("\(key) was made after \(stop), yet it ran") }
    }
    switch node.kind {
    case .queue, .dispatch: return
    default: break
    }
    let reached = max(returned, events.addedUncancelled[node.id] ?? returned)
    for child in node.children + node.late { checkNothingRuns(below: child, after: reached, stop: stop) }
  }
}
