import JobKit

/// The outcome of a job, as `run()` (or `waitForFinish()`) reports it.
enum OutcomeTag: Hashable, Sendable, CustomStringConvertible {
  case success
  case cancelled
  /// `ModelStopError(job:)`: the job was stopped with `fail(_:)` by the test.
  case stopFailed(job: Int)
  /// `ModelError(spec:)`: a task (or its last attempt) failed.
  case taskFailed(spec: Int)
  case timedOut
  /// `JobFailures` (a `.collect` job, a group or a command dispatch).
  case failures
  case other(String)

  init(_ error: (any Error)?, isCancelled: Bool) {
    switch error {
    case nil: self = isCancelled ? .cancelled : .success
    case is CancellationError, is ModelStopReason: self = .cancelled
    case let error as ModelStopError: self = .stopFailed(job: error.job)
    case let error as ModelError: self = .taskFailed(spec: error.spec)
    case let error as JobKitError where error.code == .timedOut: self = .timedOut
    case is JobFailures: self = .failures
    case let error?: self = .other(String(describing: error))
    }
  }

  var description: String {
    switch self {
    case .success: return "success"
    case .cancelled: return "CancellationError"
    case .stopFailed(let job): return "fail(ModelStopError(job: \(job)))"
    case .taskFailed(let spec): return "ModelError(s\(spec))"
    case .timedOut: return "timedOut"
    case .failures: return "JobFailures"
    case .other(let text): return "other(\(text))"
    }
  }
}

/// The error a generated task fails with.
struct ModelError: Error, Equatable {
  let spec: Int
}

/// The error the test stops a job with through `fail(_:)`.
struct ModelStopError: Error, Equatable {
  let job: Int
}

/// The reason the test cancels a job with through `cancel(reason:)`: a cancel, whose reason its
/// nested jobs and its `run()` carry.
struct ModelStopReason: Error, Equatable {
  let job: Int
}

/// What the documented rules predict for one job.
struct JobExpectation {
  /// Outcomes if nobody stops the job (no planned stop, no stop by a parent).
  var normal: Set<OutcomeTag>
  /// Outcomes the job may end with, given its planned stop.
  var allowed: Set<OutcomeTag>
  /// For a `.collect` job that was not stopped: how many failures `JobFailures` lists.
  var failureCount: ClosedRange<Int>
  /// `allTasksFinished()` calls of a job that was not stopped.
  var allTasksFinishedCalls: Int
  /// Group callbacks of a job that was not stopped, for the groups whose count the rules fix.
  var exactGroupCallbacks: [String: Int]
  /// Every spec a job that was not stopped tracks (and routes once).
  var specIDs: Set<Int>
}

/// The reference model: predictions from a plan and the documented routing rules.
enum WorkflowModel {
  /// What a task spec's finish means for its job's failure policy.
  struct Failure {
    var certain = false
    var possible = false
    var tags: Set<OutcomeTag> = []
  }

  static func failure(of spec: TaskSpec) -> Failure {
    let fails: Bool
    var tags: Set<OutcomeTag> = [.taskFailed(spec: spec.id)]
    switch spec.work {
    case .kind(_, let finish, let taskFails):
      if finish == .untilCancelled {
        return Failure(certain: true, possible: true, tags: [.timedOut])
      }
      if case .retry(let failing, let maxAttempts) = spec.tracking {
        fails = failing >= maxAttempts
      } else {
        fails = taskFails
      }
    case .nested(let plan):
      let outcomes = expectation(for: plan, sharedOperation: false).allowed
      let failing = outcomes.subtracting([.success, .cancelled])
      return Failure(
        certain: !outcomes.contains(.success) && !outcomes.contains(.cancelled), possible: !failing.isEmpty,
        tags: failing)
    case .sequential(let leaves), .concurrent(let leaves), .dispatch(let leaves, _):
      fails = leaves.contains { $0.fails }
      tags = [.failures]
    case .blockTask(let leaf):
      fails = leaf.fails
    case .pipeline(let steps, let failingStep):
      fails = failingStep.map { $0 < steps } ?? false
    }
    return fails ? Failure(certain: true, possible: true, tags: tags) : Failure()
  }

  /// The expectation for `plan`. `sharedOperation`: the job also tracks the shared plain
  /// operation before it starts (part of `main()`'s round).
  static func expectation(for plan: JobPlan, sharedOperation: Bool) -> JobExpectation {
    let specs = plan.allSpecs
    var certain = 0
    var possible = 0
    var tags: Set<OutcomeTag> = []
    for (spec, _) in specs {
      let failure = failure(of: spec)
      if failure.certain { certain += 1 }
      if failure.possible { possible += 1 }
      tags.formUnion(failure.tags)
    }
    var normal: Set<OutcomeTag>
    switch plan.policy {
    case .ignore: normal = [.success]
    case .collect: normal = possible == 0 ? [.success] : (certain > 0 ? [.failures] : [.success, .failures])
    case .failFast: normal = possible == 0 ? [.success] : (certain > 0 ? tags : tags.union([.success]))
    }
    let failFastTags: Set<OutcomeTag> = plan.policy == .failFast ? tags : []
    var allowed: Set<OutcomeTag>
    switch plan.stop {
    case .none: allowed = normal
    case .insideMain(let kind, _), .insideCallback(let kind, _, _):
      allowed = failFastTags.union([stopTag(kind, job: plan.id)])
    case .outside(let kind): allowed = normal.union([stopTag(kind, job: plan.id)])
    case .swiftTaskCancel: allowed = normal.union([.cancelled])
    }
    return JobExpectation(
      normal: normal, allowed: allowed, failureCount: certain...max(certain, possible),
      allTasksFinishedCalls: plan.refills.count + 1,
      exactGroupCallbacks: exactGroupCallbacks(plan, sharedOperation: sharedOperation),
      specIDs: Set(specs.map(\.spec.id)))
  }

  static func stopTag(_ kind: StopKind, job: Int) -> OutcomeTag {
    kind == .fail ? .stopFailed(job: job) : .cancelled
  }

  /// Group callback counts the rules fix. A task is *anchored* when it is tracked by `main()` (or
  /// before the job starts), by `allTasksFinished()`, or by the own callback of an anchored task
  /// of its own group: its group cannot reach zero before it is tracked. A group whose tasks are
  /// all anchored, none tracked by a group callback, fires once per round that tracks it (the
  /// `main()` round and each `allTasksFinished()` refill), because every round starts with every
  /// group at zero. Other groups fire a timing-dependent number of times; for them the runner
  /// checks the invariants only (fires at zero, never twice without a new task, fires last after
  /// its last task).
  static func exactGroupCallbacks(_ plan: JobPlan, sharedOperation: Bool) -> [String: Int] {
    var rounds: [String: Set<String>] = [:]
    var unpredictable: Set<String> = []
    var anchoredRound: [Int: String] = [:]
    for (spec, site) in plan.allSpecs {
      let key = spec.work.groupKey
      switch site {
      case .main: anchoredRound[spec.id] = "main"
      case .refill(let index): anchoredRound[spec.id] = "refill \(index)"
      case .groupFollowup: unpredictable.insert(key)
      case .callback(let parent):
        let parentKey = plan.allSpecs.first { $0.spec.id == parent }?.spec.work.groupKey
        if let round = anchoredRound[parent], parentKey == key {
          anchoredRound[spec.id] = round
        } else {
          unpredictable.insert(key)
        }
      }
      if let round = anchoredRound[spec.id] { rounds[key, default: []].insert(round) }
    }
    if sharedOperation { rounds[ModelKind.plain.groupKey, default: []].insert("main") }
    var result: [String: Int] = [:]
    for (key, keyRounds) in rounds where !unpredictable.contains(key) {
      result[key] = keyRounds.count
    }
    return result
  }
}
