import Foundation

/// A kind of remote task: the types of its input and output, and its stable name in the table.
///
/// Kinds are `Sendable` (usually a case-less enum) so handlers can name them from any task.
/// A row names its kind by ``name``, never code: a worker runs only the kinds registered with it
/// (``RemoteWorker/register(_:maxConcurrent:handler:)``). Input and output travel as JSON.
///
/// ```swift
/// enum HashFile: RemoteTaskKind {
///     typealias Input = String          // a path
///     typealias Output = [UInt8]        // its digest
///     static let name = "hash-file"
/// }
/// ```
public protocol RemoteTaskKind: Sendable {
  /// What the job sends to the worker.
  associatedtype Input: Codable & Sendable
  /// What the worker's handler returns to the job.
  associatedtype Output: Codable & Sendable
  /// The kind's stable name, stored in each row. Renaming a kind orphans its queued rows.
  static var name: String { get }
}

/// A remote task's failure as stored in its row: the handler's error (or the worker's reason,
/// such as an unregistered kind, an undecodable input or a worker that died holding the task)
/// and the attempt that failed last.
///
/// Match on ``code``; two errors are equal when their codes are equal, whatever their
/// ``message`` and ``attempt``.
public struct RemoteTaskError: Error, Sendable, Hashable, CustomStringConvertible {
  /// Why the task failed. Compare codes with `==`, or match the static members.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    /// The code's name, as stored in the row's `error_code`; codes are equal when their names are.
    public let name: String

    /// A code named `name` (a row's stored code).
    public init(name: String) {
      self.name = name
    }

    /// The handler threw an error (its description is the message), on the last attempt.
    public static let handlerFailed = Code(name: "handlerFailed")
    /// No worker that claimed the row has a handler for its kind.
    public static let noHandler = Code(name: "noHandler")
    /// The row's input does not decode as the kind's `Input`.
    public static let inputUndecodable = Code(name: "inputUndecodable")
    /// The lease of the last attempt expired: the worker died or stopped heartbeating while it
    /// held the task (a handler that crashes its process ends so).
    public static let leaseExpired = Code(name: "leaseExpired")
    /// The handler threw `CancellationError` though nobody asked for a cancel, on the last attempt.
    public static let cancelledWithoutRequest = Code(name: "cancelledWithoutRequest")
    /// The stored output does not decode as the kind's `Output` (read by the job).
    public static let outputUndecodable = Code(name: "outputUndecodable")

    /// The code's name, for example `handlerFailed`.
    public var description: String { name }
  }

  /// Why the task failed.
  public let code: Code
  /// What went wrong, as the worker stored it (`String(describing:)` of the handler's error).
  public let message: String
  /// The attempt (1, 2, …) whose failure is stored.
  public let attempt: Int

  /// Creates an error of code ``Code/handlerFailed``; workers create them, tests compare them.
  public init(message: String, attempt: Int) {
    self.init(.handlerFailed, message: message, attempt: attempt)
  }

  /// Creates an error with `code`.
  public init(_ code: Code, message: String, attempt: Int) {
    self.code = code
    self.message = message
    self.attempt = attempt
  }

  /// Two errors are equal when their codes are equal; the messages and attempts are not compared.
  public static func == (lhs: RemoteTaskError, rhs: RemoteTaskError) -> Bool {
    lhs.code == rhs.code
  }

  /// Hashes the code only, consistent with `==`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
  }

  /// The message, for logs.
  public var description: String { "remote task failed on attempt \(attempt) (\(code)): \(message)" }
}

/// What a handler knows about the task it runs: the attempt (1 for the first run; a handler that
/// is not naturally idempotent uses it and ``idempotencyKey`` to detect a re-run) and
/// cancellation.
///
/// The handler runs in a Swift `Task` that the worker cancels when the row's job asks for a
/// cancel (seen within one heartbeat), when the lease was lost, or at the end of a graceful
/// shutdown's grace period: `Task.isCancelled`, ``isCancelled`` and cancellable awaits see it.
public struct RemoteTaskContext: Sendable {
  /// The task's attempt, 1 for the first run; more after a failure or a worker's death.
  public let attempt: Int
  /// The row's id in the queue's table.
  public let taskID: Int64
  /// The key the job gave the task (unique in its queue).
  public let idempotencyKey: String
  /// The id of the worker running it (``RemoteWorker/id``).
  public let workerID: String
  /// How long ago the task's first attempt started, by the database's clock (zero on the first
  /// attempt). The jobs the handler makes count their `timeLimit` from then, not from this
  /// attempt: a job past its limit on a re-run fails at once with `timeLimitExceeded`.
  public var sinceFirstStart: Duration = .zero

  /// Whether the task was cancelled (the running Swift task's cancellation).
  public var isCancelled: Bool { Task.isCancelled }

  /// Throws `CancellationError` if the task was cancelled.
  public func checkCancellation() throws {
    try Task.checkCancellation()
  }

  /// Creates a context; workers create them, tests of handlers may too.
  public init(attempt: Int, taskID: Int64, idempotencyKey: String, workerID: String) {
    self.attempt = attempt
    self.taskID = taskID
    self.idempotencyKey = idempotencyKey
    self.workerID = workerID
  }
}
