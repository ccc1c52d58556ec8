/// Order checks on the recorded runs: a sequential container (group, queue, dispatch, pipeline)
/// runs one child at a time in the order they were added, a limit is never exceeded, and a
/// container finishes only after everything below it ended.
enum CompositionOrderChecks {
  /// The runs (leaf runs and pipeline steps) of `node`'s subtree.
  static func runs(of node: NodePlan, _ events: CompositionEvents) -> [RunRecord] {
    let ids = Set(node.all.map(\.id))
    return events.runs.filter { ids.contains($0.node) } + ids.flatMap { (events.steps[$0] ?? []).map(\.record) }
  }

  /// The span of `runs`: first start to last end (`Int.max` if one never ended), or `nil`.
  static func span(_ runs: [RunRecord]) -> (start: Int, end: Int)? {
    guard let start = runs.map(\.start).min() else { return nil }
    return (start, runs.map { $0.end ?? Int.max }.max() ?? Int.max)
  }

  /// The most spans open at once.
  static func maxOverlap(_ spans: [(start: Int, end: Int)]) -> Int {
    let points = spans.flatMap { [($0.start, 1), ($0.end, -1)] }.sorted { $0.0 < $1.0 }
    var open = 0
    var most = 0
    for (_, change) in points {
      open += change
      most = max(most, open)
    }
    return most
  }

  /// No two children's runs overlap, and a child added after another (its add began after the
  /// other's returned; for a group or dispatch, later in the plan: given at init, or pulled from
  /// the sequence, before the late ones) runs after it.
  private static func checkOneAtATime(
    _ node: NodePlan, _ children: [NodePlan], _ events: CompositionEvents, _ violation: (String) -> Void
  ) {
    let spans = children.compactMap { child in span(runs(of: child, events)).map { (child.id, $0) } }
    var isQueue = false
    if case .queue = node.kind { isQueue = true }
    let planOrder = Dictionary(uniqueKeysWithValues: children.enumerated().map { ($1.id, $0) })
    for (first, firstSpan) in spans {
      for (second, secondSpan) in spans where first != second {
        let overlap = firstSpan.start < secondSpan.end && secondSpan.start < firstSpan.end
        if overlap && first < second {
          violation("n\(node.id) is sequential, yet n\(first) and n\(second) ran at once")
        }
        let ordered =
          isQueue
          ? (events.addReturned[first] ?? Int.max) < (events.added[second] ?? Int.min)
          : (planOrder[first] ?? 0) < (planOrder[second] ?? 0)
        if ordered && !overlap && secondSpan.end < firstSpan.start {
          violation("n\(node.id) is sequential, yet n\(second) ran before n\(first), added before it")
        }
      }
    }
  }

  /// After a pipeline's `cancel()` returned, at most one of its steps starts: the first one if
  /// its start was under way (a cancel during `operationStart()` is delivered right after it),
  /// else the running step's successor never starts ("the next step does not start"). A leaf's
  /// or a group's start cannot be checked this way: one whose `start()` began before the cancel
  /// records its run after the cancel returned.
  static func checkCancelledPipelines(
    _ plan: CompositionPlan, _ events: CompositionEvents, _ violation: (String) -> Void
  ) {
    for (index, returned) in events.returned {
      guard case .cancel(let target) = plan.storms[index].action, let node = plan.nodes[target],
        case .pipeline = node.kind
      else { continue }
      let late = (events.steps[node.id] ?? []).filter { $0.record.start > returned }.map(\.step)
      if late.count > 1 { violation("n\(node.id): steps \(late) started after its cancel() returned") }
    }
  }

  static func check(_ node: NodePlan, plan: CompositionPlan, events: CompositionEvents, _ violation: (String) -> Void) {
    let all = node.children + node.late
    if node.kind.isSequential {
      if case .pipeline = node.kind {
        let steps = (events.steps[node.id] ?? []).map(\.record)
        if maxOverlap(steps.map { ($0.start, $0.end ?? Int.max) }) > 1 {
          violation("n\(node.id): two steps ran at once")
        }
      } else {
        checkOneAtATime(node, all.filter { events.added[$0.id] != nil }, events, violation)
      }
    }
    if case .job(let limit?) = node.kind {
      let limited = all.filter { if case .leaf(let spec) = $0.kind { return spec.limited } else { return false } }
      let spans = limited.flatMap { child in events.runs.filter { $0.node == child.id } }.map {
        ($0.start, $0.end ?? Int.max)
      }
      let most = maxOverlap(spans)
      if most > limit { violation("n\(node.id): \(most) LimitedLeafs ran at once, the limit is \(limit)") }
    }
    if case .concurrent(let takingMax?) = node.kind {
      let most = maxOverlap(node.children.compactMap { span(runs(of: $0, events)) })
      if most > takingMax {
        violation("n\(node.id): \(most) tasks of its sequence ran at once, maxRunning is \(takingMax)")
      }
    }
    let finished = events.completions[NodeAttempt(node: node.id, attempt: 1)]?.first ?? Int.max
    let lastEnd = runs(of: node, events).map { $0.end ?? Int.max }.max() ?? Int.min
    if lastEnd > finished { violation("n\(node.id) finished (its completionBlock ran) before a run below it ended") }
  }
}
