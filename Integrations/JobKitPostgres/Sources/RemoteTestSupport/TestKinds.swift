import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO

/// A task that echoes its input after an optional sleep, recording each run in
/// `jobkit_test_executions` (so tests count the runs of each key).
public enum EchoKind: RemoteTaskKind {
  public struct Input: Codable, Sendable, Equatable {
    public var text: String
    public var bytes: [UInt8]
    public var sleepMilliseconds: Int
    /// The handler fails (throws) on attempts below this one.
    public var failBeforeAttempt: Int

    public init(text: String, bytes: [UInt8] = [], sleepMilliseconds: Int = 0, failBeforeAttempt: Int = 0) {
      self.text = text
      self.bytes = bytes
      self.sleepMilliseconds = sleepMilliseconds
      self.failBeforeAttempt = failBeforeAttempt
    }
  }

  public struct Output: Codable, Sendable, Equatable {
    public var text: String
    public var bytes: [UInt8]
    public var attempt: Int
    public var worker: String
  }

  public static let name = "echo"
}

/// A kind that no worker registers.
public enum UnregisteredKind: RemoteTaskKind {
  public typealias Input = String
  public typealias Output = String
  public static let name = "unregistered"
}

/// The error `EchoKind`'s handler throws before `failBeforeAttempt`.
public struct PlannedFailure: Error, CustomStringConvertible {
  public let attempt: Int
  public var description: String { "planned failure on attempt \(attempt); with 'quotes'; and semicolons" }
}

/// The tests' tables and handlers.
public enum TestSupport {
  /// Creates the executions table (idempotent; concurrent callers serialised by a lock).
  public static func prepare(_ client: PostgresClient) async throws {
    try await client.withTransaction(logger: Logger(label: "test")) { connection in
      let logger = Logger(label: "test")
      try await connection.query("SELECT pg_advisory_xact_lock(42)", logger: logger)
      try await connection.query(
        """
        CREATE TABLE IF NOT EXISTS jobkit_test_executions (
          queue text NOT NULL, key text NOT NULL, attempt integer NOT NULL, worker text NOT NULL,
          cancelled_after_ms integer)
        """, logger: logger)
    }
  }

  /// Registers `EchoKind` on `worker`, recording each run through `client`.
  public static func registerEcho(on worker: RemoteWorker, client: PostgresClient, maxConcurrent: Int? = nil) {
    let queue = worker.queue.name
    worker.register(EchoKind.self, maxConcurrent: maxConcurrent) { input, context in
      try await client.query(
        """
        INSERT INTO jobkit_test_executions (queue, key, attempt, worker)
        VALUES (\(queue), \(context.idempotencyKey), \(Int32(context.attempt)), \(context.workerID))
        """)
      if input.sleepMilliseconds > 0 {
        let start = ContinuousClock.now
        do {
          try await Task.sleep(for: .milliseconds(input.sleepMilliseconds))
        } catch {
          let elapsed = ContinuousClock.now - start
          let milliseconds = Int32(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
          // Recorded from a task of its own: this one is cancelled.
          try await Task.detached {
            _ = try await client.query(
              """
              UPDATE jobkit_test_executions SET cancelled_after_ms = \(milliseconds)
              WHERE queue = \(queue) AND key = \(context.idempotencyKey) AND attempt = \(Int32(context.attempt))
              """)
          }.value
          throw error
        }
      }
      if context.attempt < input.failBeforeAttempt {
        throw PlannedFailure(attempt: context.attempt)
      }
      return EchoKind.Output(text: input.text, bytes: input.bytes, attempt: context.attempt, worker: context.workerID)
    }
  }

  /// How many times each key of `queue` ran.
  public static func executions(_ client: PostgresClient, queue: String) async throws -> [String: Int] {
    var counts: [String: Int] = [:]
    let rows = try await client.query(
      "SELECT key, count(*)::integer FROM jobkit_test_executions WHERE queue = \(queue) GROUP BY key")
    for try await (key, count) in rows.decode((String, Int32).self) {
      counts[key] = Int(count)
    }
    return counts
  }

  /// A job that tracks `count` echo tasks with keys `prefix-0`, `prefix-1`, … and counts the
  /// results routed to it: each key's result must come exactly once.
  public final class EchoJob: JobController, @unchecked Sendable {
    // @unchecked Sendable: `results` is touched only by the job's serial callbacks and read
    // after the job finished.
    public let queue: RemoteQueue
    public let count: Int
    public let prefix: String
    public let sleepMilliseconds: Int
    public private(set) var results: [String: Int] = [:]
    public private(set) var failureMessages: [String: String] = [:]
    public private(set) var outputs: [String: EchoKind.Output] = [:]

    public init(queue: RemoteQueue, count: Int, prefix: String, sleepMilliseconds: Int = 0) {
      self.queue = queue
      self.count = count
      self.prefix = prefix
      self.sleepMilliseconds = sleepMilliseconds
      super.init()
    }

    public override func main() {
      for index in 0..<count {
        let key = "\(prefix)-\(index)"
        let input = EchoKind.Input(text: key, sleepMilliseconds: sleepMilliseconds)
        trackAndQueue(resultOf: RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: key)) { result in
          self.results[key, default: 0] += 1
          switch result {
          case .success(let output): self.outputs[key] = output
          case .failure(let error): self.failureMessages[key] = String(describing: error)
          }
        }
      }
    }
  }
}
