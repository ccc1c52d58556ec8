import Foundation
import JobKitTesting

@testable import JobKit

/// What a `ModelJob` saw of its own callbacks, behind its lock.
struct JobObservation {
  var holder: UInt?
  var depth = 0
  var current = ""
  var mainRan = false
  var mainReturned = false
  var stoppedInside = false
  var outsideStopReturned = false
  var callbacksAfterOutsideStop = 0
  var stopCalls = 0
  var triggered = false
  var pendingRunTaskCancel = false
  var runTask: Task<Void, Never>?
  var callbacks: [Int: Int] = [:]
  var sharedCallbacks: [String: Int] = [:]
  var tracked: [String: Int] = [:]
  var routed: [String: Int] = [:]
  var fires: [String: Int] = [:]
  var lastFire: [String: Int] = [:]
  var allTasksFinishedCalls = 0
  var tasks: [WeakRef] = []
  var inner: [Int: [WeakRef]] = [:]
  var trace: [String] = []
}

/// The job the generator's plans run in: it tracks its plan's tasks from `main()` and its
/// callbacks, and checks the routing rules as the callbacks arrive.
final class ModelJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: mutable state lives in `observed`, behind a lock; the rest is immutable.
  let plan: JobPlan
  let context: WorkflowContext
  private let specs: [Int: TaskSpec]
  private let observed = ModelLocked(JobObservation())
  private weak let parentJob: ModelJob?

  init(plan: JobPlan, context: WorkflowContext, parent: ModelJob?) {
    self.plan = plan
    self.context = context
    self.parentJob = parent
    specs = Dictionary(plan.allSpecs.map { ($0.spec.id, $0.spec) }, uniquingKeysWith: { first, _ in first })
    super.init()
    // A cancelled task that takes longer than the grace period is reported as a misuse (a
    // violation). As long as the hang limit: a task whose body waits for a thread of a
    // saturated pool is slow, not stuck (see `ModelBasedConfig.hangSeconds`).
    cancellationGracePeriod = .seconds(ModelBasedConfig.defaultHangSeconds)
    // Misuses are checked by the model (`WorkflowChecks`); keep the expected ones off the log.
    QuietMisuse.silence(self)
    context.register(self)
    context.watch(self, "job \(plan.id)")
    // `queueOfTasks`: reading the public `taskQueue` would hand the queue out, and the job would
    // then queue every task through it (the model must see JobKit start its own operations).
    context.watch(queueOfTasks, "taskQueue of job \(plan.id)")
  }

  var observation: JobObservation { observed.withLock { $0 } }

  private func violation(_ text: String) {
    context.violation("job \(plan.id): \(text)")
  }

  // MARK: - One at a time

  private enum Entry { case main, task, group, allFinished }

  private func enter(_ name: String, _ entry: Entry) {
    let thread = UInt(pthread_self())
    let problems: [String] = observed.withLock { state in
      var problems: [String] = []
      if state.trace.count < 80 { state.trace.append(name) }
      if let holder = state.holder {
        let nestedInMain = holder == thread && state.current == "main" && state.depth == 1 && entry == .task
        if !nestedInMain {
          problems.append("\(name) entered while \(state.current) runs" + (holder == thread ? " (nested)" : ""))
        }
      }
      if entry == .main { state.mainRan = true }
      if (entry == .group || entry == .allFinished) && !state.mainReturned {
        problems.append("\(name) ran before main() returned")
      }
      if state.stoppedInside { problems.append("\(name) ran after the job stopped itself") }
      if state.outsideStopReturned {
        state.callbacksAfterOutsideStop += 1
        if state.callbacksAfterOutsideStop > 1 {
          problems.append("\(name) started after a stop from another thread had returned (one allowed)")
        }
      }
      if state.depth == 0 { state.current = name }
      state.holder = thread
      state.depth += 1
      return problems
    }
    problems.forEach(violation)
  }

  private func exit() {
    observed.withLock { state in
      state.depth -= 1
      if state.depth == 0 { state.holder = nil }
    }
  }

  // MARK: - Plan

  override func main() {
    enter("main", .main)
    if plan.readsProgressInMain { _ = fractionCompleted }
    failurePolicy = plan.policy
    for (kind, limit) in plan.limits.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
      switch kind {
      case .alpha: setMaxConcurrentTasks(limit, forGroup: AlphaTask.self)
      case .beta: setMaxConcurrentTasks(limit, forGroup: BetaTask.self)
      case .plainSub: setMaxConcurrentTasks(limit, forGroup: PlainSubTask.self)
      case .plain: setMaxConcurrentTasks(limit, forGroup: BlockOperation.self)
      case .testTask: setMaxConcurrentTasks(limit, forGroup: TestTask.self)
      }
    }
    for kind in plan.handlers.sorted(by: { $0.rawValue < $1.rawValue }) {
      let handler: @Sendable () -> Void = { [weak self] in self?.groupFinished(kind.groupKey, viaHandler: true) }
      switch kind {
      case .alpha: setCompletion(forGroup: AlphaTask.self, handler)
      case .beta: setCompletion(forGroup: BetaTask.self, handler)
      case .plainSub: setCompletion(forGroup: PlainSubTask.self, handler)
      case .plain: setCompletion(forGroup: BlockOperation.self, handler)
      case .testTask: setCompletion(forGroup: TestTask.self, handler)
      }
    }
    for (index, spec) in plan.mainTasks.enumerated() {
      if case .insideMain(let kind, let after) = plan.stop, after == index { stopInside(kind) }
      trackSpec(spec)
    }
    if case .insideMain(let kind, let after) = plan.stop, after == plan.mainTasks.count { stopInside(kind) }
    observed.withLock { $0.mainReturned = true }
    exit()
  }

  override func taskFinished(_ task: Operation) {
    if task.name?.hasPrefix("shared") == true {
      sharedRouted(task, viaCompletion: false)
    } else if let name = task.name, let id = Int(name.dropFirst()), let spec = specs[id] {
      taskRouted(spec, task, viaCompletion: false)
    } else {
      violation("taskFinished got an unknown task \(task.name ?? "?") (\(type(of: task)))")
    }
  }

  override func taskGroupFinished(_ group: Operation.Type) {
    let key = String(describing: group)
    if plan.handlers.contains(where: { $0.groupKey == key }) {
      violation("taskGroupFinished(\(key)) called although the group has a handler")
    }
    groupFinished(key, viaHandler: false)
  }

  override func allTasksFinished() {
    enter("allTasksFinished", .allFinished)
    let call: Int = observed.withLock { state in
      state.allTasksFinishedCalls += 1
      return state.allTasksFinishedCalls
    }
    let unrouted = observation.tracked.reduce(0) { $0 + $1.value } - observation.routed.reduce(0) { $0 + $1.value }
    if unrouted != 0 { violation("allTasksFinished with \(unrouted) tracked task(s) not routed") }
    if call == 1 && plan.readsParentProgressFromOutside {
      DispatchQueue.global().async { [weak parentJob] in _ = parentJob?.fractionCompleted }
    }
    if call <= plan.refills.count {
      for spec in plan.refills[call - 1] { trackSpec(spec) }
    }
    exit()
  }

  private func groupFinished(_ key: String, viaHandler: Bool) {
    enter("group \(key)", .group)
    let (followups, problems): ([TaskSpec], [String]) = observed.withLock { state in
      var problems: [String] = []
      let tracked = state.tracked[key, default: 0]
      let routed = state.routed[key, default: 0]
      if tracked != routed || tracked == 0 {
        problems.append("group \(key) fired with \(tracked - routed) of its \(tracked) tracked task(s) not routed")
      }
      if let last = state.lastFire[key], last >= tracked {
        problems.append("group \(key) fired twice without a new task in between")
      }
      state.fires[key, default: 0] += 1
      state.lastFire[key] = tracked
      return (state.fires[key] == 1 ? plan.groupFollowups[key] ?? [] : [], problems)
    }
    problems.forEach(violation)
    for spec in followups { trackSpec(spec) }
    exit()
  }

  private func sharedRouted(_ task: Operation, viaCompletion: Bool) {
    enter("shared", .task)
    let name = task.name ?? "shared"
    let count: Int = observed.withLock { state in
      state.sharedCallbacks[name, default: 0] += 1
      state.routed[ModelKind.plain.groupKey, default: 0] += 1
      return state.sharedCallbacks[name, default: 0]
    }
    if count > 1 { violation("\(name)'s callback ran \(count) times") }
    if !task.isFinished { violation("\(name) was routed before it finished") }
    exit()
  }

  /// Tracks the plain operation two jobs share (called before the job starts).
  func trackShared(_ operation: BlockOperation, completion: Bool) {
    observed.withLock { $0.tracked[ModelKind.plain.groupKey, default: 0] += 1 }
    if completion {
      track(operation) { [weak self] in self?.sharedRouted($0, viaCompletion: true) }
    } else {
      track(operation)
    }
  }

  private func taskRouted(_ spec: TaskSpec, _ task: Operation, viaCompletion: Bool) {
    enter("s\(spec.id)", .task)
    let (count, inner) = observed.withLock { state in
      state.callbacks[spec.id, default: 0] += 1
      state.routed[spec.work.groupKey, default: 0] += 1
      return (state.callbacks[spec.id, default: 0], state.inner[spec.id] ?? [])
    }
    if count > 1 { violation("s\(spec.id)'s own callback ran \(count) times") }
    if viaCompletion != spec.tracking.usesCompletion {
      violation("s\(spec.id) was routed to \(viaCompletion ? "its completion" : "taskFinished") unexpectedly")
    }
    if !task.isFinished { violation("s\(spec.id) was routed before it finished") }
    checkFinishedTask(spec, task, inner: inner)
    if plan.readsProgressAtSpec == spec.id { _ = fractionCompleted }
    var stop: StopKind?
    var before = false
    if case .insideCallback(let kind, let id, let beforeChildren) = plan.stop, id == spec.id {
      (stop, before) = (kind, beforeChildren)
    }
    if let stop, before { stopInside(stop) }
    for child in spec.children { trackSpec(child) }
    if let stop, !before { stopInside(stop) }
    exit()
  }

  private func checkFinishedTask(_ spec: TaskSpec, _ task: Operation, inner: [WeakRef]) {
    if case .kind(let kind, let finish, let fails) = spec.work, kind.canFail, finish != .untilCancelled,
      let operation = task as? ModelTask, !operation.isCancelled
    {
      var expectedFailure = fails
      if case .retry(let failing, let maxAttempts) = spec.tracking {
        expectedFailure = failing >= maxAttempts
        let attempt = min(failing + 1, maxAttempts)
        if operation.attempt != attempt { violation("s\(spec.id) routed attempt \(operation.attempt), not \(attempt)") }
      }
      if (operation.error != nil) != expectedFailure {
        violation("s\(spec.id) finished with error \(String(describing: operation.error))")
      }
    }
    if let nested = task as? ModelJob, !nested.unfinishedTasks.isEmpty {
      violation("nested job \(nested.plan.id) finished while \(nested.unfinishedTasks) still ran")
    }
    // A sequential dispatch creates each later command when its turn comes: read them now.
    let created = (task as? CommandDispatch)?.commands.map { WeakRef($0, "command \(type(of: $0))") } ?? []
    let running = (inner + created).compactMap(\.unfinishedLabel)
    if !running.isEmpty { violation("s\(spec.id) finished while its inner tasks \(running) still ran") }
  }

  /// Tracked tasks (and their inner tasks) that are alive and not finished.
  var unfinishedTasks: [String] {
    let refs = observed.withLock { $0.tasks + $0.inner.values.joined() }
    return refs.compactMap(\.unfinishedLabel)
  }

  // MARK: - Tracking and stopping

  private func watchTask(_ task: Operation, _ spec: TaskSpec, inner: [Operation] = []) {
    let label = "s\(spec.id) (\(type(of: task))) of job \(plan.id)"
    context.watch(task, label)
    observed.withLock { state in
      state.tasks.append(WeakRef(task, label))
      state.inner[spec.id, default: []] += inner.map { WeakRef($0, "inner \(type(of: $0)) of \(label)") }
    }
  }

  /// A group's leaf made when the group took it from its sequence: watched from then on, like
  /// the leaves of a group that got them up front.
  func noteInner(_ task: Operation, of spec: TaskSpec) -> Operation {
    let label = "inner \(type(of: task)) of s\(spec.id) of job \(plan.id)"
    observed.withLock { $0.inner[spec.id, default: []].append(WeakRef(task, label)) }
    return task
  }

  private func startHook(_ spec: TaskSpec) -> (@Sendable () -> Void)? {
    guard spec.triggersOutsideStop else { return nil }
    return { [weak self] in self?.triggerOutsideStop() }
  }

  private func trackSpec(_ spec: TaskSpec) {
    observed.withLock { $0.tracked[spec.work.groupKey, default: 0] += 1 }
    let routed: @Sendable (Operation) -> Void = { [weak self] in self?.taskRouted(spec, $0, viaCompletion: true) }
    if case .retry(let failing, let maxAttempts) = spec.tracking {
      let policy = RetryPolicy(
        maxAttempts: maxAttempts, initialDelay: .microseconds(200), maxDelay: .milliseconds(2), jitter: true)
      trackAndQueue(
        retrying: policy,
        { [weak self] attempt in
          let task = ModelTaskFactory.modelTask(
            spec, attempt: attempt, fails: attempt <= failing, onStart: self?.startHook(spec))
          if let self {
            if self.isFinished { self.violation("s\(spec.id) attempt \(attempt) was made after the job finished") }
            self.watchTask(task, spec)
          }
          return task
        }, completion: routed)
      return
    }
    let (task, inner) = ModelTaskFactory.make(spec, job: self, onStart: startHook(spec))
    watchTask(task, spec, inner: inner)
    switch spec.tracking {
    case .queued(true): trackAndQueue(task, completion: routed)
    case .queued(false): trackAndQueue(task)
    case .byTest(let completion):
      if completion { track(task, completion: routed) } else { track(task) }
      context.sideQueue.addOperation(task)
    case .timeout(let milliseconds): trackAndQueue(task, timeout: .milliseconds(milliseconds), completion: routed)
    case .alreadyStarted: track(task, completion: routed)
    case .retry: break
    }
  }

  private func stopInside(_ kind: StopKind) {
    observed.withLock {
      $0.stoppedInside = true
      $0.stopCalls += 1
    }
    stop(kind)
  }

  /// Stops the job as `kind` says.
  private func stop(_ kind: StopKind) {
    switch kind {
    case .cancel: cancel()
    case .cancelReason: cancel(reason: ModelStopReason(job: plan.id))
    case .fail: fail(ModelStopError(job: plan.id))
    }
  }

  /// Records a stop the test made before the job started (it counts as a stop, not a callback).
  func markStoppedByTest() { observed.withLock { $0.stopCalls += 1 } }

  /// Remembers the Swift task awaiting `run()`, for a `.swiftTaskCancel` stop.
  func setRunTask(_ task: Task<Void, Never>) {
    let cancelNow = observed.withLock { state in
      state.runTask = task
      return state.pendingRunTaskCancel
    }
    if cancelNow { task.cancel() }
  }

  private func triggerOutsideStop() {
    let first = observed.withLock { state in
      defer { state.triggered = true }
      return !state.triggered
    }
    guard first else { return }
    DispatchQueue.global().async { [weak self] in
      guard let self else { return }
      switch self.plan.stop {
      case .outside(let kind):
        self.observed.withLock { $0.stopCalls += 1 }
        self.stop(kind)
        self.observed.withLock { $0.outsideStopReturned = true }
      case .swiftTaskCancel:
        let task: Task<Void, Never>? = self.observed.withLock { state in
          state.stopCalls += 1
          if state.runTask == nil { state.pendingRunTaskCancel = true }
          return state.runTask
        }
        task?.cancel()
      default: break
      }
    }
  }
}
