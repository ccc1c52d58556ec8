import JobKit

/// The task classes a workflow uses. Each is its own group (routing groups by exact class).
enum ModelKind: Int, CaseIterable, Sendable, CustomStringConvertible {
  /// `AlphaTask`, a `ConcurrentOperation`.
  case alpha
  /// `BetaTask`, a `ConcurrentOperation`.
  case beta
  /// `PlainSubTask`, a `BlockOperation` subclass (observed through its `completionBlock`).
  case plainSub
  /// A plain `BlockOperation`.
  case plain
  /// JobKitTesting's `TestTask`; used only for tasks that run until cancelled.
  case testTask

  var isPlain: Bool { self == .plainSub || self == .plain }
  var canFail: Bool { self == .alpha || self == .beta }
  var groupKey: String {
    switch self {
    case .alpha: return "AlphaTask"
    case .beta: return "BetaTask"
    case .plainSub: return "PlainSubTask"
    case .plain: return "BlockOperation"
    case .testTask: return "TestTask"
    }
  }
  var description: String { groupKey }
}

/// When a generated `ConcurrentOperation` task finishes.
enum FinishMode: Sendable {
  /// Inside `operationStart()`.
  case atOnce
  /// From a global dispatch queue, soon after it started.
  case later
  /// From a thread of its own.
  case onThread
  /// Never on its own: only when cancelled (by its timeout or a stop).
  case untilCancelled
}

/// A `BlockTask` inside a composite task.
struct LeafPlan: Sendable {
  var isAsync: Bool
  var fails: Bool
}

/// What a tracked task is.
indirect enum TaskWork: Sendable {
  case kind(ModelKind, finish: FinishMode, fails: Bool)
  case nested(JobPlan)
  case sequential([LeafPlan])
  case concurrent([LeafPlan])
  case blockTask(LeafPlan)
  case pipeline(steps: Int, failingStep: Int?)
  case dispatch([LeafPlan], concurrent: Bool)

  /// The routing group: the name of the task's exact class.
  var groupKey: String {
    switch self {
    case .kind(let kind, _, _): return kind.groupKey
    case .nested: return "ModelJob"
    case .sequential: return "SequentialGroup"
    case .concurrent: return "ConcurrentGroup"
    case .blockTask: return "BlockTask"
    case .pipeline: return "Pipeline<Int>"
    case .dispatch: return "CommandDispatch"
    }
  }
}

/// How a task is tracked.
enum Tracking: Sendable, Equatable {
  /// `trackAndQueue(_:)` (routed to `taskFinished`) or `trackAndQueue(_:completion:)`.
  case queued(completion: Bool)
  /// `track(_:)` or `track(_:completion:)`; the test adds the task to a queue of its own.
  case byTest(completion: Bool)
  /// `trackAndQueue(_:timeout:completion:)`.
  case timeout(milliseconds: Int)
  /// `trackAndQueue(retrying:_:completion:)`; the first `failingAttempts` attempts fail.
  case retry(failingAttempts: Int, maxAttempts: Int)
  /// `track(_:completion:)` of an operation that already started itself (a command dispatch).
  case alreadyStarted

  var usesCompletion: Bool {
    switch self {
    case .queued(let completion), .byTest(let completion): return completion
    case .timeout, .retry, .alreadyStarted: return true
    }
  }
}

/// One tracked task and the tasks its own callback tracks.
struct TaskSpec: Sendable {
  var id: Int
  var work: TaskWork
  var tracking: Tracking
  var children: [TaskSpec]
  /// Its start makes another thread stop the job (`JobPlan.stop` is `.outside`).
  var triggersOutsideStop = false
}

/// How a stop is made.
enum StopKind: Sendable, Equatable {
  case cancel
  /// `cancel(reason: ModelStopReason(job:))`.
  case cancelReason
  case fail
}

/// The one planned stop of a job.
enum StopPlan: Sendable, Equatable {
  case none
  /// In `main()`, after it tracked `afterTasks` of its tasks.
  case insideMain(StopKind, afterTasks: Int)
  /// In task `spec`'s own callback, before or after it tracks its children.
  case insideCallback(StopKind, spec: Int, beforeChildren: Bool)
  /// From a global dispatch queue thread, when the task that `triggersOutsideStop` starts.
  case outside(StopKind)
  /// The Swift task awaiting `run()` is cancelled when the trigger task starts (root jobs only).
  case swiftTaskCancel
}

/// A job: its policies and the tree of tasks it tracks.
struct JobPlan: Sendable {
  var id: Int
  var depth: Int
  var policy: FailurePolicy
  var limits: [ModelKind: Int] = [:]
  var handlers: Set<ModelKind> = []
  var mainTasks: [TaskSpec] = []
  /// `allTasksFinished()` call `n` tracks `refills[n]`.
  var refills: [[TaskSpec]] = []
  /// The first callback of group `key` tracks these.
  var groupFollowups: [String: [TaskSpec]] = [:]
  var readsProgressInMain = false
  var readsProgressAtSpec: Int?
  var stop: StopPlan = .none
  /// Its `allTasksFinished()` makes another thread read its parent's progress for the first time.
  var readsParentProgressFromOutside = false

  /// Every task spec of this job (not of nested jobs), with the site that tracks it.
  var allSpecs: [(spec: TaskSpec, site: Site)] {
    var result: [(TaskSpec, Site)] = []
    func walk(_ spec: TaskSpec, _ site: Site, parent: TaskSpec?) {
      result.append((spec, site))
      for child in spec.children { walk(child, .callback(parent: spec.id), parent: spec) }
    }
    for spec in mainTasks { walk(spec, .main, parent: nil) }
    for (index, batch) in refills.enumerated() {
      for spec in batch { walk(spec, .refill(index), parent: nil) }
    }
    for (key, batch) in groupFollowups.sorted(by: { $0.key < $1.key }) {
      for spec in batch { walk(spec, .groupFollowup(key), parent: nil) }
    }
    return result
  }
}

/// Where a spec is tracked.
enum Site: Sendable, Equatable {
  case main
  case refill(Int)
  case groupFollowup(String)
  case callback(parent: Int)
}

/// How a root job is started.
enum StartMode: Sendable, CaseIterable {
  case run
  case startJob
  case ownQueue
  /// Added to a queue behind a dependency that never runs, then cancelled before it starts.
  case cancelBeforeStart
}

/// One generated workflow: one or two root jobs.
struct WorkflowPlan: Sendable {
  var seed: UInt64
  var roots: [(job: JobPlan, start: StartMode)]
  /// How many plain `BlockOperation`s both roots track at the same moment (from two threads,
  /// before they start); 0 for none.
  var sharedOperations = 0
  var sharesPlainOperation: Bool { sharedOperations > 0 }
  var taskCount = 0
  var shapes: Set<Int> = []
}
