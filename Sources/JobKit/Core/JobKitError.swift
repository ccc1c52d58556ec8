import Foundation

/// An error JobKit reports: a misuse of its API, or a condition of a task or job.
///
/// Match on ``code``; two errors are equal when their codes are equal, whatever their ``message``.
///
/// ```swift
/// if job.misuses.contains(JobKitError(.taskAlreadyTracked)) { ... }
/// ```
public struct JobKitError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong. Compare codes with `==`, or switch over the static members.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    private enum Base: String, Hashable, Sendable {
      case startedTwice
      case finishedTwice
      case finishedBeforeStart
      case taskAlreadyTracked
      case trackedAfterJobFinished
      case taskAlreadyFinished
      case taskAlreadyRunning
      case taskAlreadyQueued
      case invalidLimit
      case timedOut
      case spentBuilder
      case modifiedAfterStart
    }

    private let base: Base

    private init(_ base: Base) {
      self.base = base
    }

    /// `start()` (or `startJob()`) was called on an operation that had already started or been
    /// submitted. The later call is ignored.
    public static let startedTwice = Code(.startedTwice)
    /// `operationDone(error:)` was called on an operation that had already finished. The later
    /// call is ignored; the first outcome stands.
    public static let finishedTwice = Code(.finishedTwice)
    /// `operationDone(error:)` was called before the operation started. The call is ignored.
    public static let finishedBeforeStart = Code(.finishedBeforeStart)
    /// A job was asked to track a task it already tracks. The later call is ignored; the task's
    /// first registration (and its completion closure) stays in effect.
    public static let taskAlreadyTracked = Code(.taskAlreadyTracked)
    /// A job was asked to track a task after the job finished. The task is neither tracked nor
    /// queued, and its completion closure is not called.
    public static let trackedAfterJobFinished = Code(.trackedAfterJobFinished)
    /// A job was asked to track a task that had already finished. The task is tracked and routed
    /// at once (its callbacks run as for any finished task); it is never queued.
    public static let taskAlreadyFinished = Code(.taskAlreadyFinished)
    /// `trackAndQueue` was given a task that is already executing on some queue. The task is
    /// tracked but not queued a second time.
    public static let taskAlreadyRunning = Code(.taskAlreadyRunning)
    /// `trackAndQueue` was given a task that a job (this one or another) already queues. The task
    /// is tracked and routed when it finishes, but not added to a queue a second time (which is
    /// a fatal error in Foundation).
    public static let taskAlreadyQueued = Code(.taskAlreadyQueued)
    /// `setMaxConcurrentTasks` was given a limit below 1. The call is ignored.
    public static let invalidLimit = Code(.invalidLimit)
    /// Not a misuse: the error recorded for a task that was still running when its timeout
    /// expired (see `JobController.trackAndQueue(_:timeout:completion:)`). The task was cancelled.
    public static let timedOut = Code(.timedOut)
    /// A `Pipeline` is a spent builder: `then` was already called on it, which moved its steps to
    /// the pipeline `then` returned. Starting the spent builder, or building on it with `then`,
    /// gives a pipeline that runs no step and fails with this code.
    public static let spentBuilder = Code(.spentBuilder)
    /// `then` or `onError` was called on a `Pipeline` that had already been started (by
    /// `finally`, `run()`, a queue or a job). The started pipeline is not changed; the pipeline
    /// the call returned runs no step and fails with this code.
    public static let modifiedAfterStart = Code(.modifiedAfterStart)

    /// The code's name, for example `taskAlreadyTracked`.
    public var description: String { base.rawValue }
  }

  /// What went wrong.
  public let code: Code
  /// A sentence for a person reading a log: what happened, to which operation, and what JobKit did.
  public let message: String

  /// Creates an error with the given code and an optional human-readable message.
  public init(_ code: Code, message: String = "") {
    self.code = code
    self.message = message
  }

  /// Two errors are equal when their codes are equal; the messages are not compared.
  public static func == (lhs: JobKitError, rhs: JobKitError) -> Bool {
    lhs.code == rhs.code
  }

  /// Hashes the code only, consistent with `==`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
  }

  /// `JobKitError.<code>: <message>`.
  public var description: String {
    message.isEmpty ? "JobKitError.\(code)" : "JobKitError.\(code): \(message)"
  }
}
