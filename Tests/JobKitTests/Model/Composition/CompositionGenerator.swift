/// Builds a composition workflow from its seed: a random tree of groups, pipelines, jobs,
/// command queues and dispatches (nested both ways, at most three levels of containers), and up
/// to three storms (cancel, fail, cancelAll, pause) from other threads at random moments.
enum CompositionGenerator {
  static func plan(seed: UInt64, features: Set<CompositionFeature>) -> CompositionPlan {
    var generator = TreeGenerator(random: ModelRandom(seed: seed), features: features)
    let root = generator.container(depth: 0, parent: nil)
    let storms = generator.storms(root)
    return CompositionPlan(seed: seed, root: root, storms: storms, features: features)
  }
}

/// The generator's state while it builds one tree.
private struct TreeGenerator {
  var random: ModelRandom
  let features: Set<CompositionFeature>
  var nextID = 0
  /// Nodes still to make: keeps a workflow at about 20 nodes.
  var budget = 20
  /// Time limits still free (seconds): each node with a limit takes one, so no two are equal.
  var freeLimits = Array(1...9)

  init(random: ModelRandom, features: Set<CompositionFeature>) {
    self.random = random
    self.features = features
  }

  private func has(_ feature: CompositionFeature) -> Bool { features.contains(feature) }

  private mutating func makeID() -> Int {
    defer { nextID += 1 }
    budget -= 1
    return nextID
  }

  private mutating func containerKind() -> NodeKind {
    var kinds: [NodeKind] = []
    if has(.sequentialGroups) {
      kinds.append(
        .sequential(
          stopsOnFailure: has(.stopsOnFailure) && random.chance(0.3), taking: has(.takingGroups) && random.chance(0.4)))
    }
    if has(.concurrentGroups) {
      kinds.append(.concurrent(takingMax: has(.takingGroups) && random.chance(0.4) ? random.int(1...3) : nil))
    }
    if has(.jobs) { kinds.append(.job(limit: has(.limits) && random.chance(0.5) ? random.int(1...2) : nil)) }
    if has(.queues) { kinds.append(.queue(sequential: random.chance(0.5), pausedAdds: 0)) }
    if has(.dispatches) { kinds.append(.dispatch(concurrent: random.chance(0.5))) }
    return kinds.isEmpty ? .concurrent(takingMax: nil) : random.pick(kinds)
  }

  /// A container node with its children.
  mutating func container(depth: Int, parent: NodeKind?) -> NodePlan {
    var node = NodePlan(id: makeID(), kind: containerKind())
    timeLimit(&node)
    let count = random.chance(0.08) ? 0 : random.int(1...4)
    for _ in 0..<count where budget > 0 {
      node.children.append(child(depth: depth + 1, parent: node))
    }
    if case .queue(let sequential, _) = node.kind, random.chance(0.4) {
      node.kind = .queue(sequential: sequential, pausedAdds: random.int(0...node.children.count))
    }
    addLateChildren(&node, depth: depth)
    return node
  }

  /// With `lateAdds`, one leaf child of a group or queue adds one or two more children later.
  private mutating func addLateChildren(_ node: inout NodePlan, depth: Int) {
    switch node.kind {
    case .sequential, .concurrent, .queue: break
    default: return
    }
    guard has(.lateAdds), random.chance(0.3), budget > 0 else { return }
    let adders = node.children.indices.filter { index in
      if case .leaf(let spec) = node.children[index].kind { return spec.finish != .untilCancelled }
      return false
    }
    guard let adder = adders.first else { return }
    guard case .leaf(var spec) = node.children[adder].kind else { return }
    spec.addsLate = true
    node.children[adder].kind = .leaf(spec)
    for _ in 0..<random.int(1...2) where budget > 0 {
      node.late.append(child(depth: depth + 1, parent: node))
    }
  }

  /// With `timeLimits`, a job or group node may get a time limit (one not taken yet).
  private mutating func timeLimit(_ node: inout NodePlan) {
    switch node.kind {
    case .job, .sequential, .concurrent: break
    default: return
    }
    guard has(.timeLimits), random.chance(0.3), !freeLimits.isEmpty else { return }
    node.timeLimit = freeLimits.remove(at: random.int(0...(freeLimits.count - 1)))
  }

  private mutating func child(depth: Int, parent: NodePlan) -> NodePlan {
    var node: NodePlan
    if depth < 3 && budget > 3 && random.chance(0.3) {
      node = container(depth: depth, parent: parent.kind)
    } else if has(.pipelines) && random.chance(0.15) {
      let steps = random.int(1...4)
      let failing = random.chance(0.25) ? random.int(0...(steps - 1)) : nil
      node = NodePlan(id: makeID(), kind: .pipeline(steps: steps, failingStep: failing, asyncSteps: random.chance(0.5)))
    } else {
      node = NodePlan(id: makeID(), kind: .leaf(leaf()))
    }
    if case .job(let limit) = parent.kind { track(&node, limit: limit, onManualClock: parent.timeLimit != nil) }
    return node
  }

  private mutating func leaf() -> LeafSpec {
    LeafSpec(
      finish: random.pick([.atOnce, .later, .onThread]), fails: random.chance(0.2), honorsCancel: random.chance(0.5))
  }

  /// How a job tracks `node`: retries and timeouts for leaves, and its limit's leaves. A job
  /// with a time limit runs on the workflow's `ManualClock`, which only a storm advances: it
  /// retries nothing (a retry's delay would never pass) and its timeouts are too long to fire.
  private mutating func track(_ node: inout NodePlan, limit: Int?, onManualClock: Bool) {
    guard case .leaf(var spec) = node.kind else {
      if has(.timeouts) && random.chance(0.2) { node.tracking = .timeout(milliseconds: 60_000) }
      return
    }
    if onManualClock {
      if limit != nil && random.chance(0.7) { spec.limited = true }
      if has(.timeouts) && random.chance(0.2) { node.tracking = .timeout(milliseconds: 60_000) }
      node.kind = .leaf(spec)
      return
    }
    if limit != nil && random.chance(0.7) { spec.limited = true }
    let roll = random.int(0...9)
    if has(.retries) && roll < 3 {
      let maxAttempts = random.int(1...3)
      node.tracking = .retry(failing: random.int(0...maxAttempts), maxAttempts: maxAttempts)
    } else if has(.timeouts) && roll < 5 {
      if random.chance(0.5) {
        spec.finish = .untilCancelled
        spec.honorsCancel = true
        node.tracking = .timeout(milliseconds: random.int(1...5))
      } else {
        node.tracking = .timeout(milliseconds: 60_000)
      }
    }
    node.kind = .leaf(spec)
  }

  // MARK: - Storms

  mutating func storms(_ root: NodePlan) -> [StormPlan] {
    let nodes = root.all
    let leaves = nodes.filter { if case .leaf = $0.kind { return true } else { return false } }.map(\.id)
    let adders = nodes.filter { if case .leaf(let spec) = $0.kind { return spec.addsLate } else { return false } }
      .map(\.id)
    var result: [StormPlan] = []
    if let advance = advanceStorm(root, leaves: leaves) { result.append(advance) }
    for _ in 0..<random.int(0...3) {
      guard let action = stormAction(nodes) else { continue }
      var triggers: [StormTrigger] = leaves.flatMap { [StormTrigger.leafStarts($0), .leafEnds($0)] }
      triggers += adders.flatMap { [StormTrigger.adding($0), .adding($0)] }
      if has(.startStorms) { triggers += [.atStart, .atStart] }
      guard !triggers.isEmpty else { continue }
      let trigger = random.pick(triggers)
      let storm = StormPlan(
        action: action, trigger: trigger, inline: trigger != .atStart && random.chance(0.3),
        yields: random.int(0...40))
      if allowed(storm, nodes: nodes, all: result) { result.append(storm) }
    }
    return result
  }

  /// With time limits in the tree, usually one storm that advances the workflow's clock, most
  /// often when a leaf below a limited node starts (then its limits surely run): by 1 to 9 s.
  private mutating func advanceStorm(_ root: NodePlan, leaves: [Int]) -> StormPlan? {
    let timed = root.all.filter { $0.timeLimit != nil }
    guard !timed.isEmpty, random.chance(0.85) else { return nil }
    let below = Array(
      Set(timed.flatMap { $0.all.filter { if case .leaf = $0.kind { true } else { false } }.map(\.id) })
    )
    .sorted()
    let trigger: StormTrigger
    if !below.isEmpty && random.chance(0.7) {
      trigger = .leafStarts(random.pick(below))
    } else if !leaves.isEmpty && random.chance(0.8) {
      trigger = random.chance(0.5) ? .leafStarts(random.pick(leaves)) : .leafEnds(random.pick(leaves))
    } else {
      trigger = .atStart
    }
    return StormPlan(
      action: .advance(random.int(1...9)), trigger: trigger, inline: trigger != .atStart && random.chance(0.7),
      yields: random.int(0...40))
  }

  private mutating func stormAction(_ nodes: [NodePlan]) -> StormAction? {
    let target = random.pick(nodes)
    var actions: [StormAction] = []
    if has(.cancelStorms) { actions.append(.cancel(target.id)) }
    if has(.reasonCancels) { actions.append(.cancelReason(target.id)) }
    if has(.suspendStorms) { actions.append(.suspend(target.id)) }
    switch target.kind {
    case .sequential, .concurrent, .job, .dispatch:
      if has(.failStorms) { actions.append(.fail(target.id)) }
    case .queue:
      if has(.cancelAllStorms) { actions.append(.cancelAll(target.id)) }
      if has(.pauseStorms) { actions += [.pause(target.id), .pause(target.id)] }
    default: break
    }
    return actions.isEmpty ? nil : random.pick(actions)
  }

  /// Leaves out a storm whose race window belongs to a feature that is off.
  private func allowed(_ storm: StormPlan, nodes: [NodePlan], all: [StormPlan]) -> Bool {
    switch storm.action {
    case .pause, .suspend, .advance: return true
    default: break
    }
    guard let target = nodes.first(where: { $0.id == storm.action.target }) else { return false }
    let below = target.all
    let pausedQueues = Set(all.compactMap { if case .pause(let id) = $0.action { return id } else { return nil } })
    for node in below {
      switch node.kind {
      case .pipeline where !has(.pipelineCancels): return false
      case .job(let limit?) where limit > 0 && !has(.limitsRacingStop): return false
      case .queue(let sequential, let pausedAdds):
        if sequential && !has(.sequentialCancelAll) { return false }
        if (pausedAdds > 0 || pausedQueues.contains(node.id)) && !has(.cancelAllRacingResume) { return false }
      default: break
      }
      if !node.late.isEmpty && !has(.addsRacingCancel) { return false }
    }
    return true
  }
}
