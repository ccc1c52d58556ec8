import Foundation
import JobKit

/// The checks made once a workflow's roots finished, against `WorkflowModel`'s predictions.
enum WorkflowChecks {
  /// An error as the reason checks compare it: one value handed down compares equal.
  static func reasonKey(_ error: any Error) -> String { String(reflecting: error) }

  /// A job's `cancellationReason` is its parent's (handed down), its own planned stop's, or, for
  /// `.failFast`, its first failure (its error). A job a failure stopped (its planned `fail`, or a
  /// `.failFast` failure) reports its error as its reason.
  static func checkReason(_ job: ModelJob, parent: ModelJob?, start: StartMode?, _ violation: (String) -> Void) {
    if let error = job.error, job.plan.policy == .failFast || error is ModelStopError {
      let reason = job.cancellationReason.map(reasonKey) ?? "nil"
      if reason != reasonKey(error) {
        violation("failed with \(reasonKey(error)), but its cancellationReason is \(reason)")
      }
    }
    guard let reason = job.cancellationReason else { return }
    var allowed: [any Error] = []
    if let inherited = parent?.cancellationReason { allowed.append(inherited) }
    switch job.plan.stop {
    case .insideMain(let kind, _), .insideCallback(let kind, _, _), .outside(let kind):
      switch kind {
      case .cancel: allowed.append(CancellationError())
      case .cancelReason: allowed.append(ModelStopReason(job: job.plan.id))
      case .fail: allowed.append(ModelStopError(job: job.plan.id))
      }
    case .swiftTaskCancel: allowed.append(CancellationError())
    case .none: break
    }
    if start == .cancelBeforeStart { allowed.append(CancellationError()) }
    if job.plan.policy == .failFast, let error = job.error { allowed.append(error) }
    let keys = Set(allowed.map(reasonKey))
    if !keys.contains(reasonKey(reason)) {
      violation("its cancellationReason is \(reasonKey(reason)); the model allows \(keys.sorted())")
    }
  }

  static func check(
    _ job: ModelJob, parent: ModelJob?, outcome: OutcomeTag, failureCount: Int?, parentStopped: Bool,
    start: StartMode?, sharedOperations: Int, jobs: [Int: ModelJob]
  ) {
    let plan = job.plan
    let context = job.context
    func violation(_ text: String) { context.violation("job \(plan.id): \(text)") }
    checkReason(job, parent: parent, start: start, violation)
    let expect = WorkflowModel.expectation(for: plan, sharedOperation: sharedOperations > 0)
    let seen = job.observation
    var allowed = expect.allowed
    if parentStopped { allowed.insert(.cancelled) }
    if start == .cancelBeforeStart {
      allowed = [.cancelled]
      if seen.mainRan || !seen.trace.isEmpty {
        violation("cancelled before its queue started it, yet ran \(seen.trace)")
      }
    }
    if !job.isFinished { violation("not finished although its parent finished") }
    if !allowed.contains(outcome) {
      violation("ended with \(outcome); the model allows \(allowed.map(\.description).sorted())")
    }
    let stopped =
      seen.stopCalls > 0 || job.isCancelled || parentStopped || start == .cancelBeforeStart
      || (plan.policy == .failFast && outcome != .success)
    if !stopped {
      checkUnstopped(
        job, expect: expect, seen: seen, outcome: outcome, failureCount: failureCount,
        sharedOperations: sharedOperations, violation)
    }
    let running = job.unfinishedTasks
    if !running.isEmpty { violation("finished while its tasks \(running) still ran") }
    let fraction = job.fractionCompleted
    if fraction != 1.0 { violation("progress ended at \(fraction), not 1.0") }
    let hasDispatch = plan.allSpecs.contains { if case .dispatch = $0.spec.work { return true } else { return false } }
    // Tracking a dispatch (started by `dispatch`) or a shared operation the test queued first may
    // find it finished: documented as `taskAlreadyFinished`, routed at once.
    let mayFindFinished = hasDispatch || sharedOperations > 0
    // A limit whose group tracked no task is reported once when the job finishes, unless a stop
    // ended it (then it may be, or not: `stopped` also covers stops that may not have reached it).
    let neverTracked = plan.limits.keys.map(\.groupKey).filter { seen.tracked[$0, default: 0] == 0 }
    let reportedUnused = job.misuses.filter { $0.code == .limitNeverUsed }.map(\.message)
    let unusedReported = neverTracked.filter { key in reportedUnused.contains { $0.contains("forGroup: \(key).self") } }
    if unusedReported.count != reportedUnused.count || (!stopped && unusedReported.count != neverTracked.count) {
      violation("limitNeverUsed reported as \(reportedUnused); its groups that tracked nothing: \(neverTracked)")
    }
    let unexpected = job.misuses.filter {
      !(mayFindFinished && $0.code == .taskAlreadyFinished) && $0.code != .limitNeverUsed
    }
    if !unexpected.isEmpty { violation("unexpected misuses \(unexpected)") }

    for (spec, _) in plan.allSpecs {
      guard case .nested(let nestedPlan) = spec.work, let nested = jobs[nestedPlan.id] else { continue }
      let nestedOutcome = OutcomeTag(nested.error, isCancelled: nested.isCancelled)
      check(
        nested, parent: job, outcome: nestedOutcome, failureCount: (nested.error as? JobFailures)?.failures.count,
        parentStopped: stopped, start: nil, sharedOperations: 0, jobs: jobs)
    }
  }

  private static func checkUnstopped(
    _ job: ModelJob, expect: JobExpectation, seen: JobObservation, outcome: OutcomeTag, failureCount: Int?,
    sharedOperations: Int, _ violation: (String) -> Void
  ) {
    if !seen.mainRan { violation("main() never ran") }
    let wrong = expect.specIDs.sorted().filter { seen.callbacks[$0] != 1 }
    if !wrong.isEmpty {
      violation(
        "own callbacks not run exactly once: "
          + wrong.map { "s\($0)×\(seen.callbacks[$0] ?? 0)" }.joined(separator: ", "))
    }
    let sharedWrong = (0..<sharedOperations).filter { seen.sharedCallbacks["shared\($0)"] != 1 }
    if !sharedWrong.isEmpty {
      violation("own callbacks of shared operations \(sharedWrong) did not run exactly once")
    }
    if seen.allTasksFinishedCalls != expect.allTasksFinishedCalls {
      violation(
        "allTasksFinished ran \(seen.allTasksFinishedCalls) times, the model says \(expect.allTasksFinishedCalls)")
    }
    for (key, tracked) in seen.tracked.sorted(by: { $0.key < $1.key }) where tracked > 0 {
      if seen.lastFire[key] != tracked {
        violation("group \(key): last callback after \(seen.lastFire[key] ?? 0) of its \(tracked) tasks")
      }
    }
    for (key, count) in expect.exactGroupCallbacks.sorted(by: { $0.key < $1.key })
    where seen.fires[key, default: 0] != count {
      violation("group \(key) fired \(seen.fires[key, default: 0]) times, the model says \(count)")
    }
    if outcome == .failures {
      let listed = failureCount ?? -1
      if !expect.failureCount.contains(listed) || job.failures.count != listed {
        violation(
          "JobFailures lists \(listed) (failures: \(job.failures.count)), the model says \(expect.failureCount)")
      }
    }
  }
}
