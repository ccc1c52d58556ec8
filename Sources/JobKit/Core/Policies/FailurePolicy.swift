import Foundation

/// What a ``JobController`` does when a tracked task fails.
///
/// A task fails when it finishes with an error: a ``ConcurrentOperation`` whose
/// ``ConcurrentOperation/error`` is set (a nested job that failed counts), or a task that ran past
/// its timeout (see ``JobController/trackAndQueue(_:timeout:completion:)``). Every failure is
/// listed in ``JobController/failures`` whatever the policy, except failures of tasks the job
/// cancelled itself (after `cancel()`, ``JobController/fail(_:)`` or a `.failFast` failure). A
/// task that will be retried has not failed yet.
public enum FailurePolicy: Sendable {
  /// Route failed tasks like any other; the default.
  case ignore
  /// Run the job to its end, then finish it with a ``JobFailures`` error listing every failure.
  /// ``JobController/allTasksFinished()`` is still called first.
  case collect
  /// The first failure fails the job as ``JobController/fail(_:)`` does, with that task's error:
  /// the failed task's own callback and all later routing callbacks are skipped.
  case failFast
}

/// One tracked task that finished with an error.
public struct TaskFailure: Sendable, CustomStringConvertible {
  /// The task's `name`, or its type name when it has none.
  public let taskName: String
  /// The task's group: the name of its dynamic type.
  public let group: String
  /// The error the task finished with (``JobKitError/Code/timedOut`` for a timeout).
  public let error: any Error

  /// Creates a failure record.
  public init(taskName: String, group: String, error: any Error) {
    self.taskName = taskName
    self.group = group
    self.error = error
  }

  init(task: Operation, error: any Error) {
    let group = String(describing: type(of: task))
    self.init(taskName: task.name ?? group, group: group, error: error)
  }

  /// `<taskName> (<group>): <error>`.
  public var description: String { "\(taskName) (\(group)): \(error)" }
}

/// The error a job with ``FailurePolicy/collect`` finishes with: every failure, in the order the
/// tasks were routed.
public struct JobFailures: Error, Sendable, CustomStringConvertible {
  /// Every failure, in routing order. Never empty.
  public let failures: [TaskFailure]

  /// Creates the error from the failures it reports.
  public init(_ failures: [TaskFailure]) {
    self.failures = failures
  }

  /// One line per failure.
  public var description: String {
    "\(failures.count) task(s) failed:\n" + failures.map { "  - \($0)" }.joined(separator: "\n")
  }
}
