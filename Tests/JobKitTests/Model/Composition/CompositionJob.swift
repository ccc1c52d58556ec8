import Foundation
import JobKit

/// A job node: a `JobController` (policy `.collect`) that tracks its children from `main()`,
/// queued, retried or with a timeout, with a limit on its `LimitedLeaf`s if its plan has one.
final class CompositionJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: every stored property is immutable.
  let plan: NodePlan
  let builder: CompositionBuilder

  init(plan: NodePlan, builder: CompositionBuilder) {
    self.plan = plan
    self.builder = builder
    super.init()
    // A cancelled leaf that ignores the cancel is not a misuse worth a report here.
    cancellationGracePeriod = nil
  }

  override func main() {
    failurePolicy = .collect
    // Only with a limited leaf to limit: a limit whose group tracked nothing is reported.
    let hasLimitedLeaf = plan.children.contains { child in
      if case .leaf(let spec) = child.kind { return spec.limited }
      return false
    }
    if case .job(let limit?) = plan.kind, hasLimitedLeaf {
      setMaxConcurrentTasks(limit, forGroup: LimitedLeaf.self)
    }
    let log = builder.log
    for child in plan.children {
      let routed: @Sendable (Operation) -> Void = { [weak self] task in
        log.routed(child.id)
        if self?.isFinished ?? true { log.violation("n\(child.id)'s completion ran after its job finished") }
        if !task.isFinished { log.violation("n\(child.id) was routed by its job before it finished") }
      }
      log.added(child.id)
      switch child.tracking {
      case .queued:
        trackAndQueue(builder.build(child), completion: routed)
      case .retry(let failing, let maxAttempts):
        let policy = RetryPolicy(
          maxAttempts: maxAttempts, initialDelay: .microseconds(200), maxDelay: .milliseconds(2), jitter: true)
        let builder = builder
        trackAndQueue(
          retrying: policy,
          { attempt in builder.leaf(child, attempt: attempt, fails: attempt <= failing, addLate: nil) },
          completion: routed)
      case .timeout(let milliseconds):
        trackAndQueue(builder.build(child), timeout: .milliseconds(milliseconds), completion: routed)
      }
    }
  }

  override func allTasksFinished() {
    builder.log.allTasksFinished(plan.id)
  }
}
