import Foundation
import JobKit
import JobKitTesting

/// A generated `ConcurrentOperation` task; subclasses only give it its own group.
class ModelTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: every stored property is immutable after init.
  let specID: Int
  let attempt: Int
  let finish: FinishMode
  let failure: (any Error)?
  let onStart: (@Sendable () -> Void)?

  init(specID: Int, attempt: Int, finish: FinishMode, fails: Bool, onStart: (@Sendable () -> Void)?) {
    self.specID = specID
    self.attempt = attempt
    self.finish = finish
    self.failure = fails ? ModelError(spec: specID) : nil
    self.onStart = onStart
    super.init()
    name = "s\(specID)"
  }

  override func operationStart() {
    onStart?()
    switch finish {
    case .atOnce: operationDone(error: failure)
    case .later: DispatchQueue.global().async { self.operationDone(error: self.failure) }
    case .onThread: Thread { self.operationDone(error: self.failure) }.start()
    case .untilCancelled: break
    }
  }

  override func operationCancelled() {
    if finish == .untilCancelled { operationDone() }
  }
}

/// Group `AlphaTask`.
final class AlphaTask: ModelTask, @unchecked Sendable {
  // @unchecked Sendable: adds no state to ModelTask.
}

/// Group `BetaTask`.
final class BetaTask: ModelTask, @unchecked Sendable {
  // @unchecked Sendable: adds no state to ModelTask.
}

/// Group `PlainSubTask`: a `BlockOperation` subclass, observed through its `completionBlock`.
final class PlainSubTask: BlockOperation, @unchecked Sendable {
  // @unchecked Sendable: adds no state to BlockOperation.
}

/// A weak reference with a label, for leak checks and "finished" checks.
final class WeakRef: @unchecked Sendable {
  // @unchecked Sendable: `object` is written only in init; reading a weak reference is atomic.
  weak var object: AnyObject?
  let label: String
  init(_ object: AnyObject, _ label: String) {
    self.object = object
    self.label = label
  }
  /// The label if the object is an operation that is alive and not finished.
  var unfinishedLabel: String? {
    guard let operation = object as? Operation, !operation.isFinished else { return nil }
    return label
  }
}

/// A value behind an `NSLock` (TSan reports false races on `Mutex` on this toolchain).
final class ModelLocked<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched under `lock`.
  private let lock = NSLock()
  private var value: Value
  init(_ value: Value) { self.value = value }
  func withLock<R>(_ body: (inout Value) -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    return body(&value)
  }
}

/// What one workflow shares: its violations, the objects it watches and its jobs.
final class WorkflowContext: Sendable {
  let seed: UInt64
  /// The queue the test adds `track`ed tasks to.
  let sideQueue = OperationQueue()
  private let state = ModelLocked((violations: [String](), watched: [WeakRef](), jobs: [ModelJob]()))

  init(seed: UInt64) {
    self.seed = seed
    sideQueue.name = "ModelBased.sideQueue"
  }

  func violation(_ text: String) { state.withLock { $0.violations.append(text) } }
  var violations: [String] { state.withLock { $0.violations } }
  func watch(_ object: AnyObject, _ label: String) { state.withLock { $0.watched.append(WeakRef(object, label)) } }
  var watched: [WeakRef] { state.withLock { $0.watched } }
  func register(_ job: ModelJob) { state.withLock { $0.jobs.append(job) } }
  var jobs: [ModelJob] { state.withLock { $0.jobs } }
  func dropJobs() { state.withLock { $0.jobs.removeAll() } }
}

/// An event type for command dispatches.
struct ModelEvent: Sendable {
  let spec: Int
}

/// Builds the operation a spec stands for.
enum ModelTaskFactory {
  static func modelTask(_ spec: TaskSpec, attempt: Int, fails: Bool, onStart: (@Sendable () -> Void)?) -> ModelTask {
    guard case .kind(let kind, let finish, _) = spec.work else { preconditionFailure("not a kind spec") }
    if kind == .beta {
      return BetaTask(specID: spec.id, attempt: attempt, finish: finish, fails: fails, onStart: onStart)
    }
    return AlphaTask(specID: spec.id, attempt: attempt, finish: finish, fails: fails, onStart: onStart)
  }

  /// Every other group takes its leaves from a lazy sequence (`init(taking:)`, a concurrent one
  /// with two slots), which makes each leaf only when its turn comes; the others get them all up
  /// front.
  static func takesFromSequence(_ spec: TaskSpec) -> Bool {
    spec.id.isMultiple(of: 2)
  }

  static func leafTask(_ leaf: LeafPlan, spec: Int) -> BlockTask {
    if leaf.isAsync {
      return BlockTask(async: {
        await Task.yield()
        if leaf.fails { throw ModelError(spec: spec) }
      })
    }
    return BlockTask { if leaf.fails { throw ModelError(spec: spec) } }
  }

  /// The operation for `spec` (not a retried one), and the operations inside it to watch.
  static func make(
    _ spec: TaskSpec, job: ModelJob, onStart: (@Sendable () -> Void)?
  ) -> (Operation, [Operation]) {
    let operation: Operation
    var inner: [Operation] = []
    switch spec.work {
    case .kind(let kind, let finish, let fails):
      switch kind {
      case .alpha, .beta:
        operation = modelTask(spec, attempt: 1, fails: fails, onStart: onStart)
      case .plainSub:
        operation = PlainSubTask { onStart?() }
      case .plain:
        operation = BlockOperation { onStart?() }
      case .testTask:
        operation = TestTask("s\(spec.id)", finishesOnCancel: true)
        _ = finish
      }
    case .nested(let plan):
      let nested = ModelJob(plan: plan, context: job.context, parent: job)
      operation = nested
    case .sequential(let leaves) where takesFromSequence(spec):
      operation = SequentialGroup(taking: leaves.lazy.map { job.noteInner(leafTask($0, spec: spec.id), of: spec) })
    case .concurrent(let leaves) where takesFromSequence(spec):
      operation = ConcurrentGroup(
        taking: leaves.lazy.map { job.noteInner(leafTask($0, spec: spec.id), of: spec) }, maxRunning: 2)
    case .sequential(let leaves):
      inner = leaves.map { leafTask($0, spec: spec.id) }
      operation = SequentialGroup(inner)
    case .concurrent(let leaves):
      inner = leaves.map { leafTask($0, spec: spec.id) }
      operation = ConcurrentGroup(inner)
    case .blockTask(let leaf):
      operation = leafTask(leaf, spec: spec.id)
    case .pipeline(let steps, let failingStep):
      var pipeline = Pipeline.start { () async throws -> Int in
        if failingStep == 0 { throw ModelError(spec: spec.id) }
        return 0
      }
      for step in 1..<max(steps, 1) {
        pipeline = pipeline.then { value in
          if failingStep == step { throw ModelError(spec: spec.id) }
          return value + 1
        }
      }
      operation = pipeline
    case .dispatch(let leaves, let concurrent):
      let map = CommandMap(concurrent: concurrent)
      for leaf in leaves {
        map.map(ModelEvent.self) { event in leafTask(leaf, spec: event.spec) }
      }
      let dispatch = map.dispatch(ModelEvent(spec: spec.id))
      inner = dispatch.commands
      operation = dispatch
    }
    if case .dispatch = spec.work {
      // Already running: its name is left alone; it is routed through its completion closure.
    } else {
      operation.name = "s\(spec.id)"
    }
    return (operation, inner)
  }
}
