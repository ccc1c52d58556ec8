import Foundation

/// A value that travels from a job down to every task it tracks, nested jobs included, at any
/// depth: what an integration needs when the code that creates its tasks runs in a job's
/// callbacks, on its queue's threads, where a Swift task-local does not reach.
///
/// A job takes the scope bound in ``JobController/currentScope`` when it is made; a job made
/// without one takes the scope of the job that tracks and queues it. A tracked task that adopts
/// ``JobScopeInheriting`` is handed the tracking job's scope before it is queued.
///
/// A scope may also say how much of their ``JobController/timeLimit`` the jobs made in it used
/// before they started (a durable job run again after a crash counts from its first start),
/// and hand its tracked tasks another scope (one that used none).
@_spi(JobScope)
public protocol JobScope: AnyObject, Sendable {
  /// Taken from the time limit of a job that holds this scope when it starts; zero by default.
  var timeAlreadyUsed: Duration { get }
  /// The scope a job holding this one hands down to what it tracks; this one by default.
  var handedDown: any JobScope { get }
}

@_spi(JobScope)
extension JobScope {
  /// None: a job's time limit counts from its start.
  public var timeAlreadyUsed: Duration { .zero }
  /// This scope.
  public var handedDown: any JobScope { self }
}

/// A task that takes the ``JobScope`` of the job tracking it.
@_spi(JobScope)
public protocol JobScopeInheriting: AnyObject {
  /// Called by the job that tracks the task, with the job's scope, before the job queues it;
  /// on the tracking thread, with no lock held. Called once per job that tracks it.
  func inheritScope(_ scope: any JobScope)
}

extension JobController {
  /// The scope the jobs made in this Swift task take (see ``JobScope``); bound by
  /// ``withScope(_:_:)``.
  @_spi(JobScope) public static var currentScope: (any JobScope)? { scopeOfTask }

  /// Runs `operation` with `scope` as ``currentScope``.
  @_spi(JobScope)
  public static func withScope<Result: Sendable>(
    _ scope: (any JobScope)?, _ operation: @Sendable () async throws -> Result
  ) async rethrows -> Result {
    try await $scopeOfTask.withValue(scope, operation: operation)
  }

  @TaskLocal static var scopeOfTask: (any JobScope)?

  /// The job's scope: bound when it was made, else handed down by the job that tracked and
  /// queued it; `nil` if neither had one.
  @_spi(JobScope) public var scope: (any JobScope)? { inheritedScope }

  /// Hands the job's scope to `task` as `track` tracks it, before it is queued. A nested job
  /// takes it only if it has none and `queuedHere` (this job queues it: it has not started, so
  /// nothing reads its scope yet).
  func handDownScope(to task: Operation, queuedHere: Bool) {
    guard let scope = inheritedScope?.handedDown else { return }
    if let job = task as? JobController {
      if queuedHere, job.inheritedScope == nil { job.inheritedScope = scope }
    } else if let inheriting = task as? any JobScopeInheriting {
      inheriting.inheritScope(scope)
    }
  }
}
