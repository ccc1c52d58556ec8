import Foundation
import JobKit

/// The checks made once a composition workflow's root finished (and every completion block ran),
/// against `CompositionModel`'s predictions and the recorded events.
struct CompositionChecks {
  let plan: CompositionPlan
  let events: CompositionEvents
  let model: CompositionModel
  let reasons: CompositionReasonChecks
  private(set) var violations: [String] = []

  init(plan: CompositionPlan, events: CompositionEvents) {
    self.plan = plan
    self.events = events
    model = CompositionModel(
      plan: plan, struck: Set(events.struck.filter { $0.value > 0 }.keys),
      expired: CompositionReasons.expired(plan, events))
    reasons = CompositionReasonChecks(plan: plan, events: events)
    violations = events.violations + reasons.violations
    for node in plan.root.all { checkNode(node) }
    CompositionOrderChecks.checkCancelledPipelines(plan, events) { violations.append($0) }
    for node in plan.root.all where node.kind.isContainer || { if case .pipeline = node.kind { true } else { false } }()
    {
      CompositionOrderChecks.check(node, plan: plan, events: events) { violations.append($0) }
    }
  }

  private mutating func violation(_ node: NodePlan, _ text: String) {
    violations.append("n\(node.id): \(text)")
  }

  private mutating func checkNode(_ node: NodePlan) {
    guard let expect = model.expectations[node.id] else { return }
    let attempts = events.operations.keys.filter { $0.node == node.id }.sorted { $0.attempt < $1.attempt }
    guard let last = attempts.last, let operation = events.operations[last] else {
      if expect.mustRun { violation(node, "never made, although nothing stopped it") }
      return
    }
    if events.added[node.id] == nil && node.id != plan.root.id {
      violation(node, "made but never handed to its container")
    }
    for key in attempts {
      guard let attempt = events.operations[key] else { continue }
      if !attempt.isFinished { violation(node, "\(key) never finished") }
      let completions = events.completions[key]?.count ?? 0
      if completions != 1 { violation(node, "\(key)'s completionBlock ran \(completions) times") }
      if let misuses = (attempt as? ConcurrentOperation)?.misuses, !misuses.isEmpty {
        violation(node, "\(key) reported misuses \(misuses.map(\.code))")
      }
    }
    let outcome = CompositionOutcome(operation)
    if !expect.allowed.contains(outcome) {
      violation(node, "ended \(outcome); the model allows \(expect.allowed.map(\.description).sorted())")
    }
    switch node.kind {
    case .leaf: checkLeaf(node, expect, attempts: attempts)
    case .pipeline(let steps, let failingStep, _):
      checkPipeline(node, expect, outcome: outcome, steps: steps, failingStep: failingStep, operation: operation)
    case .job: checkJob(node, expect)
    case .queue: checkQueue(node, operation: operation)
    default: break
    }
  }

  private mutating func checkLeaf(_ node: NodePlan, _ expect: NodeExpectation, attempts: [NodeAttempt]) {
    for key in attempts {
      let runs = events.runs.filter { $0.node == node.id && $0.attempt == key.attempt }
      if runs.isEmpty, let operation = events.operations[key], !operation.isCancelled {
        violation(node, "\(key) finished without running, yet was not cancelled")
      }
      if runs.contains(where: { $0.end == nil }) { violation(node, "\(key) started and never ended its run") }
    }
    let ran = Set(events.runs.filter { $0.node == node.id }.map(\.attempt))
    if expect.skipped && !ran.isEmpty { violation(node, "ran after its stop-on-failure group failed") }
    // A timeout runs from the moment the task is tracked (PoliciesAndObservation): a short one
    // can cancel the task while it waits for its queue or its job's limit.
    if case .timeout(let milliseconds) = node.tracking, milliseconds < 1_000 { return }
    guard expect.mustRun else { return }
    var expected = 1
    if case .retry(let failing, let maxAttempts) = node.tracking { expected = min(failing + 1, maxAttempts) }
    if ran != Set(1...expected) { violation(node, "ran attempts \(ran.sorted()), the model says 1...\(expected)") }
  }

  private mutating func checkPipeline(
    _ node: NodePlan, _ expect: NodeExpectation, outcome: CompositionOutcome, steps: Int, failingStep: Int?,
    operation: Operation
  ) {
    let ran = events.steps[node.id] ?? []
    let handlers = events.errorHandlers[node.id] ?? []
    if ran.map(\.step) != Array(0..<ran.count) { violation(node, "steps ran as \(ran.map(\.step))") }
    if ran.isEmpty && !operation.isCancelled && !expect.skipped {
      violation(node, "finished without running a step, yet was not cancelled")
    }
    let failedStepRan = failingStep.map { failing in ran.contains { $0.step == failing } } ?? false
    if let failing = failingStep, ran.contains(where: { $0.step > failing }) {
      violation(node, "a step after the failing step \(failing) ran")
    }
    if handlers.count > 1 { violation(node, "onError ran \(handlers.count) times") }
    if handlers.count == 1 && (!failedStepRan || outcome != .failed(node.id)) {
      violation(node, "onError ran, yet the pipeline ended \(outcome) (failing step ran: \(failedStepRan))")
    }
    if outcome == .failed(node.id) && handlers.count != 1 { violation(node, "failed without its onError handler") }
    if let handler = handlers.first, let lastEnd = ran.last?.record.end, handler < lastEnd {
      violation(node, "onError ran before the last step ended")
    }
    guard expect.mustRun else { return }
    let count = failingStep.map { $0 + 1 } ?? steps
    if ran.count != count { violation(node, "ran \(ran.count) of the \(count) steps the model says") }
  }

  private mutating func checkJob(_ node: NodePlan, _ expect: NodeExpectation) {
    let calls = events.allTasksFinished[node.id] ?? 0
    if calls > 1 || (expect.mustRun && calls != 1) { violation(node, "allTasksFinished ran \(calls) times") }
    for child in node.children {
      let routed = events.routed[child.id] ?? 0
      let made = events.operations.keys.contains { $0.node == child.id }
      if routed > 1 || (made && expect.mustRun && routed != 1) {
        violation(node, "the completion of n\(child.id) ran \(routed) times")
      }
    }
  }

  /// Each failed command is reported by exactly one `onDrained` call (a command the queue
  /// cancelled may be left out, as `CommandQueue` documents); the queue drained at least once if
  /// a command was added.
  private mutating func checkQueue(_ node: NodePlan, operation: Operation) {
    let drains = events.drains[node.id] ?? []
    let commands = (node.children + node.late).filter { events.added[$0.id] != nil }
    if !commands.isEmpty && drains.isEmpty { violation(node, "onDrained never ran") }
    let reported = drains.flatMap { $0 }.sorted()
    let failed = commands.compactMap { command -> String? in
      let operation = events.operations[NodeAttempt(node: command.id, attempt: 1)]
      return (operation as? ConcurrentOperation)?.error != nil ? "n\(command.id)" : nil
    }.sorted()
    let cancelled = model.expectations[node.id]?.disturbed ?? true
    if !cancelled ? reported != failed : !Set(reported).isSubset(of: failed) || Set(reported).count != reported.count {
      violation(node, "onDrained reported failures \(reported), the failed commands are \(failed)")
    }
  }
}
