import JobKit

/// Builds a random workflow from a seed: the same seed always gives the same plan.
///
/// Defect shapes of issue 15 the generator produces on purpose (numbers for `JOBKIT_MODEL_SKIP`):
/// 1 two jobs track one plain `BlockOperation` at once; 2 a retried task in a group with a limit;
/// 3 a quick task with an unused 60 s timeout; 4 a parent reads its progress, then tracks a nested
/// job that tracks more once running (refills, group follow-ups): its progress ends below 1.0;
/// 5 progress trees more than one level deep (nested jobs that read their own progress, nest
/// further jobs or groups, dispatch commands, or refill themselves about 100 times), which crash
/// the process with SIGILL in Foundation's `_ProgressFraction` before JobKit stopped building
/// `Progress` trees;
/// 6 another thread reads a parent's progress for the
/// first time while a nested job finishes; 7 a job cancelled just before its queue starts it.
struct WorkflowGenerator {
  private var rng: ModelRandom
  private let skip: Set<Int>
  private let deepProgress: Bool
  private var nextID = 0
  private var nextJobID = 0
  private var budget: Int
  private var shapes: Set<Int> = []

  /// The plan of workflow `seed`.
  static func plan(seed: UInt64, skip: Set<Int>, deepProgress: Bool) -> WorkflowPlan {
    var generator = WorkflowGenerator(seed: seed, skip: skip, deepProgress: deepProgress)
    return generator.makeWorkflow(seed: seed)
  }

  private init(seed: UInt64, skip: Set<Int>, deepProgress: Bool) {
    rng = ModelRandom(seed: seed)
    self.skip = skip
    self.deepProgress = deepProgress
    budget = 0
    budget = rng.int(5...60)
  }

  private mutating func makeWorkflow(seed: UInt64) -> WorkflowPlan {
    let total = budget
    let shares = rng.chance(0.12) && !skip.contains(1)
    let rootCount = shares || rng.chance(0.1) ? 2 : 1
    var roots: [(job: JobPlan, start: StartMode)] = []
    for _ in 0..<rootCount {
      var start = rng.pick([StartMode.run, .run, .startJob, .ownQueue])
      if rng.chance(0.05) && !skip.contains(7) {
        start = .cancelBeforeStart
        shapes.insert(7)
      }
      roots.append((makeJob(depth: 0, parentReadsProgress: false, isRunRoot: start == .run), start))
    }
    let sharedCount = rng.int(1...24)
    if shares { shapes.insert(1) }
    return WorkflowPlan(
      seed: seed, roots: roots, sharedOperations: shares ? sharedCount : 0, taskCount: total - max(budget, 0),
      shapes: shapes)
  }

  private mutating func makeJob(depth: Int, parentReadsProgress: Bool, isRunRoot: Bool) -> JobPlan {
    nextJobID += 1
    var job = JobPlan(id: nextJobID, depth: depth, policy: rng.pick([.ignore, .ignore, .collect, .failFast]))
    for kind in [ModelKind.alpha, .beta, .plainSub, .testTask] where rng.chance(0.25) {
      job.limits[kind] = rng.int(1...3)
    }
    for kind in ModelKind.allCases where rng.chance(0.4) {
      job.handlers.insert(kind)
    }
    job.readsProgressInMain = rng.chance(0.3)
    for _ in 0..<rng.int(1...5) where budget > 0 {
      job.mainTasks.append(makeSpec(depth: 0, job: &job))
    }
    if depth > 0 && deepProgress && rng.chance(0.3) {
      job.refills = (0..<100).map { _ in [makeQuickSpec()] }
      shapes.insert(5)
    } else if rng.chance(0.25) {
      job.refills = (0..<rng.int(1...3)).map { _ in (0..<rng.int(1...2)).map { _ in makeSpec(depth: 1, job: &job) } }
    }
    if rng.chance(0.3), let first = job.mainTasks.first {
      job.groupFollowups[first.work.groupKey] = (0..<rng.int(1...2)).map { _ in makeSpec(depth: 1, job: &job) }
    }
    let specs = job.allSpecs.map(\.spec)
    if rng.chance(0.2), let spec = specs.isEmpty ? nil : rng.pick(specs) {
      job.readsProgressAtSpec = spec.id
    }
    // Nested jobs, groups and dispatches are all jobs, whose progress joins this job's as a child.
    let hasNested = job.allSpecs.contains {
      switch $0.spec.work {
      case .nested, .sequential, .concurrent, .dispatch: return true
      case .kind, .blockTask, .pipeline: return false
      }
    }
    if hasNested && (job.readsProgressInMain || job.readsProgressAtSpec != nil) {
      if skip.contains(4) {
        job.readsProgressInMain = false
        job.readsProgressAtSpec = nil
      } else {
        shapes.insert(4)
      }
    }
    if depth > 0 && rng.chance(0.3) && !skip.contains(6) && !parentReadsProgress {
      job.readsParentProgressFromOutside = true
      shapes.insert(6)
    }
    let readFromBelow = job.allSpecs.contains {
      if case .nested(let nested) = $0.spec.work { return nested.readsParentProgressFromOutside } else { return false }
    }
    if !deepProgress && (job.readsProgressInMain || job.readsProgressAtSpec != nil || readFromBelow) {
      job = Self.shallowProgressTree(job)
    } else if deepProgress && (job.readsProgressInMain || job.readsProgressAtSpec != nil) && hasNested {
      shapes.insert(5)
    }
    chooseStop(&job, isRunRoot: isRunRoot)
    return job
  }

  private mutating func chooseStop(_ job: inout JobPlan, isRunRoot: Bool) {
    let specs = job.allSpecs.map(\.spec)
    let triggers = specs.filter {
      if case .kind(let kind, _, _) = $0.work { return kind != .testTask } else { return false }
    }
    let kind = rng.pick([StopKind.cancel, .cancelReason, .fail, .fail])
    let roll = Double(rng.int(0...99)) / 100
    if roll < 0.08 {
      job.stop = .insideMain(kind, afterTasks: rng.int(0...job.mainTasks.count))
    } else if roll < 0.23, !specs.isEmpty {
      job.stop = .insideCallback(kind, spec: rng.pick(specs).id, beforeChildren: rng.chance(0.5))
    } else if roll < 0.40, !triggers.isEmpty {
      job.stop = isRunRoot && rng.chance(0.4) ? .swiftTaskCancel : .outside(kind)
      let trigger = rng.pick(triggers).id
      job.mainTasks = job.mainTasks.map { Self.markTrigger($0, id: trigger) }
      job.refills = job.refills.map { $0.map { Self.markTrigger($0, id: trigger) } }
      job.groupFollowups = job.groupFollowups.mapValues { $0.map { Self.markTrigger($0, id: trigger) } }
    }
  }

  private static func markTrigger(_ spec: TaskSpec, id: Int) -> TaskSpec {
    var spec = spec
    if spec.id == id { spec.triggersOutsideStop = true }
    spec.children = spec.children.map { markTrigger($0, id: id) }
    return spec
  }

  /// Shape 5 kept out: the progress tree below a job whose progress is read stays one level
  /// deep and small (its nested jobs read no progress and track at most three simple tasks and
  /// one refill of one task, and it dispatches no commands), because larger trees crash the
  /// process in Foundation's `_ProgressFraction` arithmetic.
  private static func shallowProgressTree(_ job: JobPlan) -> JobPlan {
    var job = job
    func shallow(_ spec: TaskSpec) -> TaskSpec {
      var spec = spec
      switch spec.work {
      case .nested(var nested):
        nested.readsProgressInMain = false
        nested.readsProgressAtSpec = nil
        // Defect 4's shape, and no more: a few simple tasks, and one refill of one task.
        nested.mainTasks = nested.mainTasks.prefix(3).map { simple($0, keepChildren: false) }
        nested.refills = nested.refills.first?.first.map { [[simple($0, keepChildren: false)]] } ?? []
        nested.groupFollowups = [:]
        if case .insideCallback(_, let id, _) = nested.stop, !nested.allSpecs.contains(where: { $0.spec.id == id }) {
          nested.stop = .none
        }
        if case .insideMain(let kind, let after) = nested.stop, after > nested.mainTasks.count {
          nested.stop = .insideMain(kind, afterTasks: nested.mainTasks.count)
        }
        spec.work = .nested(nested)
      case .dispatch:
        spec = simple(spec)
      default: break
      }
      spec.children = spec.children.map(shallow)
      return spec
    }
    func simple(_ spec: TaskSpec, keepChildren: Bool = true) -> TaskSpec {
      var spec = spec
      if !keepChildren { spec.children = [] }
      if case .kind = spec.work {
      } else {
        spec.work = .kind(.alpha, finish: .atOnce, fails: false)
        spec.tracking = .queued(completion: true)
      }
      spec.children = spec.children.map { simple($0) }
      return spec
    }
    job.mainTasks = job.mainTasks.map(shallow)
    job.refills = job.refills.map { $0.map(shallow) }
    // A follow-up keyed to a group whose first task became a simple task moves to that group.
    if let key = job.mainTasks.first?.work.groupKey {
      job.groupFollowups = [key: job.groupFollowups.values.flatMap { $0.map(shallow) }].filter { !$0.value.isEmpty }
    }
    return job
  }

  private mutating func takeID() -> Int {
    nextID += 1
    budget -= 1
    return nextID
  }

  private mutating func makeQuickSpec() -> TaskSpec {
    TaskSpec(
      id: takeID(), work: .kind(.alpha, finish: .atOnce, fails: false), tracking: .queued(completion: true),
      children: [])
  }

  private mutating func leaves() -> [LeafPlan] {
    (0..<rng.int(1...3)).map { _ in
      budget -= 1
      return LeafPlan(isAsync: rng.chance(0.4), fails: rng.chance(0.15))
    }
  }

  private mutating func makeSpec(depth: Int, job: inout JobPlan) -> TaskSpec {
    let id = takeID()
    let roll = rng.int(0...99)
    var work: TaskWork
    var tracking = Tracking.queued(completion: rng.chance(0.6))
    if rng.chance(0.25) { tracking = .byTest(completion: rng.chance(0.6)) }
    switch roll {
    case 0..<8 where job.depth < 2 && budget > 3:
      work = .nested(makeJob(depth: job.depth + 1, parentReadsProgress: job.readsProgressInMain, isRunRoot: false))
    case 0..<12: work = .sequential(leaves())
    case 12..<16: work = .concurrent(leaves())
    case 16..<22: work = .blockTask(LeafPlan(isAsync: rng.chance(0.5), fails: rng.chance(0.2)))
    case 22..<27: work = .pipeline(steps: rng.int(1...3), failingStep: rng.chance(0.2) ? rng.int(0...2) : nil)
    case 27..<32:
      work = .dispatch(leaves(), concurrent: rng.chance(0.5))
      tracking = .alreadyStarted
    default:
      (work, tracking) = makeKind(job: job, tracking: tracking)
    }
    var spec = TaskSpec(id: id, work: work, tracking: tracking, children: [])
    if depth < 3 && budget > 0 && rng.chance(0.35) {
      for _ in 0..<rng.int(1...2) where budget > 0 {
        spec.children.append(makeSpec(depth: depth + 1, job: &job))
      }
    }
    return spec
  }

  private mutating func makeKind(job: JobPlan, tracking: Tracking) -> (TaskWork, Tracking) {
    let kind = rng.pick([ModelKind.alpha, .alpha, .beta, .beta, .plainSub, .plain, .testTask])
    let finish = rng.pick([FinishMode.atOnce, .atOnce, .later, .later, .onThread])
    if kind == .testTask || (kind.canFail && rng.chance(0.08)) {
      return (.kind(kind, finish: .untilCancelled, fails: false), .timeout(milliseconds: rng.int(5...25)))
    }
    if kind.canFail && rng.chance(0.15) {
      let limited = job.limits[kind] != nil
      if !(limited && skip.contains(2)) {
        if limited { shapes.insert(2) }
        let maxAttempts = rng.int(1...3)
        return (
          .kind(kind, finish: finish, fails: false), .retry(failingAttempts: rng.int(0...3), maxAttempts: maxAttempts)
        )
      }
    }
    let fails = kind.canFail && rng.chance(0.2)
    if rng.chance(0.08) && !skip.contains(3) {
      shapes.insert(3)
      return (.kind(kind, finish: finish, fails: fails), .timeout(milliseconds: 60_000))
    }
    return (.kind(kind, finish: finish, fails: fails), tracking)
  }
}
