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
    /// The code's name; codes are equal when their names are.
    private let name: String

    /// A code named `name`. Each floor of JobKit declares its own codes next to the types that
    /// report them (the pipeline's are in `Composition`).
    init(name: String) {
      self.name = name
    }

    /// `start()` (or `startJob()`) was called on an operation that had already started or been
    /// submitted. The later call is ignored.
    public static let startedTwice = Code(name: "startedTwice")
    /// `operationDone(error:)` was called on an operation that had already finished. The later
    /// call is ignored; the first outcome stands.
    public static let finishedTwice = Code(name: "finishedTwice")
    /// `operationDone(error:)` was called before the operation started. The call is ignored.
    public static let finishedBeforeStart = Code(name: "finishedBeforeStart")
    /// A job was asked to track a task it already tracks. The later call is ignored; the task's
    /// first registration (and its completion closure) stays in effect.
    public static let taskAlreadyTracked = Code(name: "taskAlreadyTracked")
    /// A job was asked to track a task after the job finished. The task is neither tracked nor
    /// queued, and its completion closure is not called.
    public static let trackedAfterJobFinished = Code(name: "trackedAfterJobFinished")
    /// A job was asked to track a task that had already finished. The task is tracked and routed
    /// at once (its callbacks run as for any finished task); it is never queued.
    public static let taskAlreadyFinished = Code(name: "taskAlreadyFinished")
    /// `trackAndQueue` was given a task that is already executing on some queue. The task is
    /// tracked but not queued a second time.
    public static let taskAlreadyRunning = Code(name: "taskAlreadyRunning")
    /// `trackAndQueue` was given a task that JobKit already queues (a job, this one or another,
    /// or the task's own `run()`). The task is tracked and routed when it finishes, but not added
    /// to a queue a second time (which is a fatal error in Foundation).
    public static let taskAlreadyQueued = Code(name: "taskAlreadyQueued")
    /// `setMaxConcurrentTasks` was given a limit below 1: the call is ignored. Or a group that
    /// takes its tasks from a sequence was given a `maxRunning` below 1: reported when it starts,
    /// and 1 is used. Also a negative `timeLimit`, one set after the job started, a negative
    /// `setMaxQueuedTasks` count, or a `setRateLimit` rate that is not positive and finite or a
    /// burst below 1: the setting is ignored.
    public static let invalidLimit = Code(name: "invalidLimit")
    /// Not a misuse: the error recorded for a task that was still running when its timeout
    /// expired (see `JobController.trackAndQueue(_:timeout:completion:)`). The task was cancelled.
    public static let timedOut = Code(name: "timedOut")
    /// Not a misuse: a job's ``JobController/timeLimit`` ran out before it finished. The job
    /// failed with this error (its `run()` throws it) and every task and nested job below it was
    /// cancelled with it as their ``ConcurrentOperation/cancellationReason``.
    public static let timeLimitExceeded = Code(name: "timeLimitExceeded")
    /// Not a misuse of JobKit's API but of a task's contract: a job was cancelled or failed, and
    /// after its `cancellationGracePeriod` some task it cancelled had still not finished (see
    /// `JobController.cancellationGracePeriod`). The message names those tasks; the job keeps
    /// waiting for them.
    public static let unfinishedAfterCancel = Code(name: "unfinishedAfterCancel")
    /// Not a misuse: the result a task tracked for its result with dependencies
    /// (`JobController.trackAndQueue(resultOf:after:completion:)`) gets when it is skipped
    /// because a dependency failed or was cancelled (or was given up on, see
    /// ``dependencyNeverTracked``). The task never ran; it finished cancelled. The message names
    /// the dependency (its `name`, or its type).
    public static let dependencyFailed = Code(name: "dependencyFailed")
    /// A task waited for a dependency that its job never tracked (or for tasks waiting in a
    /// cycle), and nothing else could make progress: the job gave up on it, and skipped the
    /// task as if that dependency had failed (``dependencyFailed``). Reported on the job, once
    /// per skipped task, naming the dependencies.
    public static let dependencyNeverTracked = Code(name: "dependencyNeverTracked")
    /// `setMaxConcurrentTasks(_:forGroup:)` set a limit for a group (an exact type: a generic
    /// class specialised for another type is another group) of which the job tracked no task:
    /// the limit never applied. Reported on the job when it finishes (unless a cancel or a
    /// `fail` stopped it), once per such group.
    public static let limitNeverUsed = Code(name: "limitNeverUsed")
    /// A producer asked `waitForRoom(inGroup:)` for room in a job that had finished, or was
    /// waiting when it finished, without a stop (no cancel, `fail` or time limit): the call
    /// returned `false`, and what the producer still meant to track was never tracked. A
    /// producer outside a job does not keep it open: the job finishes once its tracked tasks
    /// did. Track the producer as a task of the job (see <doc:ScopeControl>, "Backpressure").
    /// Reported on the job, once per such call.
    public static let producerOutlivedJob = Code(name: "producerOutlivedJob")
    /// The code's name, for example `taskAlreadyTracked`.
    public var description: String { name }
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
