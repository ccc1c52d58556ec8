import Foundation

@testable import JobKit

/// A weak reference to an object made after the closures that need it (a group, a queue).
final class LaterRef<Object: AnyObject>: @unchecked Sendable {
  // @unchecked Sendable: `object` is only touched under `lock`.
  private let lock = NSLock()
  private weak var stored: Object?
  var object: Object? {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}

/// Makes the operations of a composition tree, each registered with the workflow's log.
struct CompositionBuilder: Sendable {
  let log: CompositionLog

  /// The operation for `node`. `addLate`, for a leaf whose spec adds late children, adds them.
  func build(_ node: NodePlan, addLate: (@Sendable () -> Void)? = nil) -> Operation {
    switch node.kind {
    case .leaf(let spec):
      return leaf(node, attempt: 1, fails: spec.fails, addLate: addLate)
    case .sequential(let stopsOnFailure, let taking):
      let parent = LaterRef<GroupJob>()
      let children = node.children.map { child in { build(child, addLate: lateAdder(node, to: parent)) } }
      let group: SequentialGroup
      if taking {
        let log = log
        group = SequentialGroup(
          taking: zip(node.children, children).lazy.map { child, make in
            log.added(child.id)
            return make()
          })
      } else {
        group = SequentialGroup(handOver(node.children, children))
      }
      group.stopsOnFailure = stopsOnFailure
      parent.object = group
      return registered(group, node)
    case .concurrent(let takingMax):
      let parent = LaterRef<GroupJob>()
      let children = node.children.map { child in { build(child, addLate: lateAdder(node, to: parent)) } }
      let group: ConcurrentGroup
      if let takingMax {
        let log = log
        group = ConcurrentGroup(
          taking: zip(node.children, children).lazy.map { child, make in
            log.added(child.id)
            return make()
          }, maxRunning: takingMax)
      } else {
        group = ConcurrentGroup(handOver(node.children, children))
      }
      parent.object = group
      return registered(group, node)
    case .pipeline(let steps, let failingStep, let asyncSteps):
      return pipeline(node, steps: steps, failingStep: failingStep, asyncSteps: asyncSteps)
    case .job:
      return registered(CompositionJob(plan: node, builder: self), node)
    case .queue:
      return registered(QueueRunner(plan: node, builder: self), node)
    case .dispatch(let concurrent):
      return registered(DispatchRunner(plan: node, builder: self, concurrent: concurrent), node)
    }
  }

  /// Makes the children given to a container when it is made (logged as added).
  private func handOver(_ plans: [NodePlan], _ makers: [() -> Operation]) -> [Operation] {
    zip(plans, makers).map { plan, make in
      log.added(plan.id)
      return make()
    }
  }

  /// The closure a group's adder leaf calls: makes the late children and adds them.
  func lateAdder(_ node: NodePlan, to parent: LaterRef<GroupJob>) -> @Sendable () -> Void {
    { [self] in
      for late in node.late {
        let operation = build(late, addLate: nil)
        log.added(late.id)
        guard let group = parent.object else {
          return log.violation("n\(node.id) was freed while its leaf added to it")
        }
        if !group.isCancelled { log.addingUncancelled(node.id) }
        group.add(operation)
      }
    }
  }

  /// The operation for a leaf (one attempt of a retried one).
  func leaf(_ node: NodePlan, attempt: Int, fails: Bool, addLate: (@Sendable () -> Void)?) -> CompositionLeaf {
    guard case .leaf(let spec) = node.kind else { preconditionFailure("not a leaf") }
    let adds = spec.addsLate ? addLate : nil
    let leaf =
      spec.limited
      ? LimitedLeaf(node: node.id, attempt: attempt, spec: spec, fails: fails, log: log, addLate: adds)
      : CompositionLeaf(node: node.id, attempt: attempt, spec: spec, fails: fails, log: log, addLate: adds)
    return registered(leaf, node, attempt: attempt)
  }

  private func pipeline(_ node: NodePlan, steps: Int, failingStep: Int?, asyncSteps: Bool) -> Operation {
    let log = log
    let id = node.id
    @Sendable func step(_ index: Int, _ value: Int) async throws -> Int {
      log.stepStarted(id, step: index)
      if asyncSteps { await Task.yield() }
      log.stepEnded(id, step: index)
      if failingStep == index { throw ModelError(spec: id) }
      return value + 1
    }
    var pipeline = Pipeline.start { try await step(0, 0) }
    for index in 1..<max(steps, 1) {
      pipeline = pipeline.then { value in try await step(index, value) }
    }
    let made = LaterRef<Operation>()
    pipeline = pipeline.onError { _ in log.errorHandler(id, finished: made.object?.isFinished ?? false) }
    made.object = pipeline
    return registered(pipeline, node)
  }

  private func registered<T: Operation>(_ operation: T, _ node: NodePlan, attempt: Int = 1) -> T {
    QuietMisuse.silence(operation)
    if let job = operation as? JobController {
      // Not the public `taskQueue`, whose read hands the queue out (see `ModelJob`).
      log.watch(job.queueOfTasks, "taskQueue of n\(node.id)")
      // A cancelled task slower than the grace period is reported as a misuse (a violation). As
      // long as the hang limit, as in the core's model: on a saturated pool a leaf that honours
      // its cancel can take more than the default 10 s to be scheduled (seed 1 of a full
      // parallel `swift test`: slow, not stuck). `CompositionJob` nodes set their own.
      if job.cancellationGracePeriod != nil {
        job.cancellationGracePeriod = .seconds(ModelBasedConfig.defaultHangSeconds)
      }
      if let limit = node.timeLimit {
        job.clock = log.clock
        job.timeLimit = .seconds(limit)
      }
    }
    return log.made(operation, node: node.id, attempt: attempt)
  }
}
