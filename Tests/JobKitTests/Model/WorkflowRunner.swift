import Foundation
import JobKit
import JobKitTesting

/// A root job's outcome, set once by the task awaiting the job.
final class OutcomeBox: Sendable {
  private let state = ModelLocked<
    (outcome: (OutcomeTag, Int?)?, thrown: String?, waiter: CheckedContinuation<Void, Never>?)
  >((nil, nil, nil))

  func set(_ error: (any Error)?) {
    let outcome = (OutcomeTag(error, isCancelled: false), (error as? JobFailures)?.failures.count)
    let thrown = error.map(WorkflowChecks.reasonKey)
    let waiter = state.withLock { state in
      state.outcome = outcome
      state.thrown = thrown
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  var outcome: (OutcomeTag, Int?)? { state.withLock { $0.outcome } }

  /// What awaiting the job threw (`WorkflowChecks.reasonKey`), `nil` if it returned.
  var thrown: String? { state.withLock { $0.thrown } }

  /// Suspends until the outcome is set or `seconds` passed (a timer, not a sleep, ends the wait).
  func wait(seconds: Double) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let done = state.withLock { state in
        if state.outcome != nil { return true }
        state.waiter = continuation
        return false
      }
      if done {
        continuation.resume()
        return
      }
      DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
        let waiter = self?.state.withLock { state in
          defer { state.waiter = nil }
          return state.waiter
        }
        waiter?.resume()
      }
    }
  }
}

/// A workflow whose root jobs were started.
struct RunningWorkflow {
  let plan: WorkflowPlan
  let context: WorkflowContext
  let roots: [ModelJob]
  let boxes: [OutcomeBox]
  let queues: [OperationQueue]
  let started: Date

  var isDone: Bool { boxes.allSatisfy { $0.outcome != nil } }
}

extension RunningWorkflow: ModelRunning {
  var rootsEnded: Bool { isDone }

  func waitForRoots(seconds: Double) async {
    for box in boxes { await box.wait(seconds: seconds) }
  }
}

/// What one workflow left behind: rule violations, and weak references for the leak check.
struct WorkflowResult {
  let seed: UInt64
  let description: String
  let violations: [String]
  let watched: [WeakRef]
}

/// Starts workflows and checks them against the model once their roots finished.
enum WorkflowRunner {
  static func start(_ plan: WorkflowPlan) async -> RunningWorkflow {
    let context = WorkflowContext(seed: plan.seed)
    let roots = plan.roots.map { ModelJob(plan: $0.job, context: context, parent: nil) }
    if plan.sharesPlainOperation {
      let seed = plan.seed
      let count = plan.sharedOperations
      // The rendezvous spins and waits: on threads of their own (see `onThread`), never on the
      // worker threads the workflows' async work needs.
      await onThread { trackShared(count, seed: seed, roots: roots, context: context) }
    }
    return startRoots(plan, roots: roots, context: context)
  }

  /// Shape 1: both roots wrap the same `count` plain operations' completionBlocks at once. Blocks.
  private static func trackShared(_ count: Int, seed: UInt64, roots: [ModelJob], context: WorkflowContext) {
    let shared = (0..<count).map { index in
      let operation = BlockOperation {}
      operation.name = "shared\(index)"
      context.watch(operation, "shared BlockOperation \(index)")
      return operation
    }
    // Odd seeds queue the operations first, so they may finish while both roots wrap them.
    let queueFirst = seed % 2 == 1
    if queueFirst { context.sideQueue.addOperations(shared, waitUntilFinished: false) }
    // A two-thread rendezvous before each operation, so both `track` calls overlap.
    let arrivals = ModelLocked([Int](repeating: 0, count: shared.count))
    // Root 1 tracks on a thread of its own (a pool could run both loops on one thread, which
    // would never pass the rendezvous), root 0 on this one (also a thread of its own).
    let trackAll: @Sendable (Int) -> Void = { root in
      for (index, operation) in shared.enumerated() {
        arrivals.withLock { $0[index] += 1 }
        while arrivals.withLock({ $0[index] }) < 2 { sched_yield() }
        roots[root].trackShared(operation, completion: root == 0)
      }
    }
    let joined = Latch()
    Thread {
      trackAll(1)
      joined.open()
    }.start()
    trackAll(0)
    joined.wait()
    if !queueFirst { context.sideQueue.addOperations(shared, waitUntilFinished: false) }
  }

  /// Starts the root jobs the way the plan says, each with a task that records its outcome.
  private static func startRoots(_ plan: WorkflowPlan, roots: [ModelJob], context: WorkflowContext) -> RunningWorkflow {
    var boxes: [OutcomeBox] = []
    var queues: [OperationQueue] = []
    for (root, start) in zip(roots, plan.roots.map(\.start)) {
      let box = OutcomeBox()
      boxes.append(box)
      switch start {
      case .run:
        root.setRunTask(
          Task {
            do { try await root.run() } catch { return box.set(error) }
            box.set(nil)
          })
        continue
      case .startJob:
        root.startJob()
      case .ownQueue:
        let queue = OperationQueue()
        queues.append(queue)
        queue.addOperation(root)
      case .cancelBeforeStart:
        // Shape 7: ready only because of the cancel, which comes before the queue starts it.
        let queue = OperationQueue()
        queues.append(queue)
        root.addDependency(BlockOperation {})
        queue.addOperation(root)
        root.markStoppedByTest()
        root.cancel()
      }
      Task {
        do { try await root.waitForFinish() } catch { return box.set(error) }
        box.set(nil)
      }
    }
    return RunningWorkflow(
      plan: plan, context: context, roots: roots, boxes: boxes, queues: queues, started: Date())
  }

  /// The violations of a workflow that did not finish in time.
  static func hang(_ running: RunningWorkflow, seconds: Double) -> WorkflowResult {
    var lines = ["hang: the workflow did not finish within \(Int(seconds)) s"]
    for job in running.context.jobs where !job.isFinished {
      lines.append("unfinished job \(job.plan.id), callbacks so far \(job.observation.trace):\n\(job.debugDescription)")
    }
    return WorkflowResult(
      seed: running.plan.seed, description: running.plan.summary, violations: lines, watched: [])
  }

  /// Checks a finished workflow against the model, then drops every strong reference to it.
  static func finish(_ running: RunningWorkflow) -> WorkflowResult {
    let plan = running.plan
    let context = running.context
    let jobs = Dictionary(context.jobs.map { ($0.plan.id, $0) }, uniquingKeysWith: { first, _ in first })
    for (index, root) in running.roots.enumerated() {
      guard let (outcome, count) = running.boxes[index].outcome else { continue }
      let start = plan.roots[index].start
      let reported = OutcomeTag(root.error, isCancelled: root.isCancelled)
      if reported != outcome && !(outcome == .cancelled && start == .run) {
        context.violation("job \(root.plan.id): awaiting it gave \(outcome), its error says \(reported)")
      }
      // `run()` and `waitForFinish()` throw the error, else, for a cancelled job, its reason.
      if root.isCancelled && root.error == nil {
        let reason = WorkflowChecks.reasonKey(root.cancellationReason ?? CancellationError())
        let thrown = running.boxes[index].thrown
        if thrown != reason {
          context.violation("job \(root.plan.id): awaiting it threw \(thrown ?? "nothing"), its reason is \(reason)")
        }
      }
      WorkflowChecks.check(
        root, parent: nil, outcome: outcome, failureCount: count, parentStopped: false, start: start,
        sharedOperations: plan.sharedOperations, jobs: jobs)
    }
    let result = WorkflowResult(
      seed: plan.seed, description: plan.summary, violations: context.violations, watched: context.watched)
    context.dropJobs()
    return result
  }
}
