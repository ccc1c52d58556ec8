import Foundation
import JobKit

/// A composition workflow whose root was queued.
struct RunningComposition {
  let plan: CompositionPlan
  let log: CompositionLog
  let box: OutcomeBox
  let queue: OperationQueue
  let started: Date

  /// The root finished, every operation made for the workflow ran its completion block, and
  /// every queue's `onDrained` calls arrived (see `CompositionLog.drainsSettled`).
  var isDone: Bool { box.outcome != nil && log.allCompleted && log.drainsSettled }
}

extension RunningComposition: ModelRunning {
  var rootsEnded: Bool { box.outcome != nil }

  func waitForRoots(seconds: Double) async { await box.wait(seconds: seconds) }
}

/// Starts composition workflows and checks them once they are done.
enum CompositionRunner {
  static func start(_ plan: CompositionPlan) -> RunningComposition {
    let log = CompositionLog(plan: plan)
    let root = CompositionBuilder(log: log).build(plan.root)
    let queue = OperationQueue()
    queue.name = "ModelBasedComposition.root"
    queue.addOperation(root)
    CompositionStorms.fire(log.claimStartStorms(), log: log)
    let box = OutcomeBox()
    Task {
      do {
        try await (root as? ConcurrentOperation)?.waitForFinish()
      } catch {
        log.rootThrew(error)
        return box.set(error)
      }
      box.set(nil)
    }
    return RunningComposition(plan: plan, log: log, box: box, queue: queue, started: Date())
  }

  /// Checks a done workflow, then drops the operations it kept (the leak check follows).
  static func finish(_ running: RunningComposition, stats: inout CompositionStats) -> WorkflowResult {
    let events = running.log.events
    let checks = CompositionChecks(plan: running.plan, events: events)
    running.log.drop()
    stats.add(events, reasons: checks.reasons)
    return WorkflowResult(
      seed: running.plan.seed, description: running.plan.summary, violations: checks.violations,
      watched: events.watched)
  }

  /// The violations of a workflow that did not finish in time: what never finished.
  static func hang(_ running: RunningComposition, seconds: Double) -> WorkflowResult {
    let events = running.log.events
    var lines = [
      "hang: the workflow did not finish within \(Int(seconds)) s (root done: \(running.box.outcome != nil))"
    ]
    for (key, operation) in events.operations.sorted(by: { $0.key.node < $1.key.node }) {
      if !operation.isFinished {
        lines.append("unfinished \(key) (\(type(of: operation)), cancelled: \(operation.isCancelled))")
        if let job = operation as? JobController { lines.append(job.debugDescription) }
      } else if events.completions[key] == nil {
        lines.append("\(key) finished, its completionBlock never ran")
      }
    }
    if !running.log.drainsSettled { lines.append("a queue's onDrained never ran, or never reported a failed command") }
    lines.append("storms struck: \(events.struck.filter { $0.value > 0 }.keys.sorted())")
    running.log.drop()
    return WorkflowResult(seed: running.plan.seed, description: running.plan.summary, violations: lines, watched: [])
  }
}

/// What the checked workflows did, in all: shows the storms and runs the checks saw.
struct CompositionStats: CustomStringConvertible {
  var operations = 0
  var leafRuns = 0
  var steps = 0
  var storms = 0
  var drains = 0
  var limitsRunOut = 0
  var reasonsChecked = 0
  var runningPathChecks = 0

  mutating func add(_ events: CompositionEvents, reasons: CompositionReasonChecks) {
    limitsRunOut += reasons.expired.count
    reasonsChecked += reasons.reasonsChecked
    runningPathChecks += reasons.runningPathChecks
    operations += events.made.count
    leafRuns += events.runs.count
    steps += events.steps.values.reduce(0) { $0 + $1.count }
    storms += events.struck.values.filter { $0 > 0 }.count
    drains += events.drains.values.reduce(0) { $0 + $1.count }
  }

  var description: String {
    "\(operations) operations, \(leafRuns) leaf runs, \(steps) pipeline steps, \(storms) storms struck,"
      + " \(drains) onDrained calls, \(limitsRunOut) time limits run out, \(reasonsChecked) reasons checked"
      + " (\(runningPathChecks) on a limit's running path)"
  }
}
