import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO

/// A task that echoes its input after an optional sleep, recording each run in
/// `jobkit_test_executions` (so tests count the runs of each key).
public enum EchoKind: RemoteTaskKind {
  /// What a test sends.
  public struct Input: Codable, Sendable, Equatable {
    /// Echoed back.
    public var text: String
    /// Echoed back (binary round trip).
    public var bytes: [UInt8]
    /// How long the handler sleeps (cancellable) before it answers.
    public var sleepMilliseconds: Int
    /// The handler fails (throws) on attempts below this one.
    public var failBeforeAttempt: Int
    /// How long the handler blocks its thread (not cancellable), as synchronous work does.
    public var blockMilliseconds: Int?
    /// The handler ends its process (exit status 70) after this many milliseconds: a poison task.
    public var exitAfterMilliseconds: Int?

    /// An input; by default the handler answers at once, on the first attempt.
    public init(
      text: String, bytes: [UInt8] = [], sleepMilliseconds: Int = 0, failBeforeAttempt: Int = 0,
      blockMilliseconds: Int? = nil, exitAfterMilliseconds: Int? = nil
    ) {
      self.text = text
      self.bytes = bytes
      self.sleepMilliseconds = sleepMilliseconds
      self.failBeforeAttempt = failBeforeAttempt
      self.blockMilliseconds = blockMilliseconds
      self.exitAfterMilliseconds = exitAfterMilliseconds
    }
  }

  /// What the handler answers.
  public struct Output: Codable, Sendable, Equatable {
    /// The input's text.
    public var text: String
    /// The input's bytes.
    public var bytes: [UInt8]
    /// The attempt that answered.
    public var attempt: Int
    /// The worker that answered.
    public var worker: String
  }

  /// The kind's name in the table.
  public static let name = "echo"
}

/// A kind that no worker registers.
public enum UnregisteredKind: RemoteTaskKind {
  /// Any text.
  public typealias Input = String
  /// Never produced.
  public typealias Output = String
  /// The kind's name in the table.
  public static let name = "unregistered"
}

/// The error `EchoKind`'s handler throws before `failBeforeAttempt`.
public struct PlannedFailure: Error, CustomStringConvertible {
  /// The attempt that failed.
  public let attempt: Int
  /// The stored message: quotes and semicolons on purpose.
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
          cancelled_after_ms integer, cancelled_at timestamptz)
        """, logger: logger)
    }
  }

  /// Registers `EchoKind` on `worker`, recording each run through `client` (and in `history`).
  public static func registerEcho(
    on worker: RemoteWorker, client: PostgresClient, maxConcurrent: Int? = nil, history: CrashHistoryLog? = nil
  ) {
    let queue = worker.queue.name
    worker.register(EchoKind.self, maxConcurrent: maxConcurrent) { input, context in
      history?.record {
        CrashHistory.Event.start(key: context.idempotencyKey, attempt: context.attempt, time: $0, pid: $1)
      }
      try await withStatementTimeout {
        try await client.query(
          """
          INSERT INTO jobkit_test_executions (queue, key, attempt, worker)
          VALUES (\(queue), \(context.idempotencyKey), \(Int32(context.attempt)), \(context.workerID))
          """)
      }
      if let milliseconds = input.exitAfterMilliseconds {
        usleep(UInt32(milliseconds) * 1000)
        exit(70)
      }
      if let milliseconds = input.blockMilliseconds {
        // Blocks the thread, as a handler that computes does.
        usleep(UInt32(milliseconds) * 1000)
      }
      if input.sleepMilliseconds > 0 {
        let start = ContinuousClock.now
        do {
          try await Task.sleep(for: .milliseconds(input.sleepMilliseconds))
        } catch {
          let elapsed = ContinuousClock.now - start
          let milliseconds = Int32(
            elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
          // Recorded from a task of its own: this one is cancelled.
          try await Task.detached {
            _ = try await client.query(
              """
              UPDATE jobkit_test_executions SET cancelled_after_ms = \(milliseconds), cancelled_at = clock_timestamp()
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

  /// Runs `statement`, again after an error or 3 s without an answer (at most 10 times): a statement sent
  /// while the server restarts can wait for ever in the client's pool.
  static func withStatementTimeout(_ statement: @escaping @Sendable () async throws -> PostgresRowSequence)
    async throws
  {
    for _ in 1...10 {
      // Unstructured: a statement that never answers must not hold this handler.
      let answered = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let first = FirstOutcome()
        Task {
          let succeeded = (try? await statement()) != nil
          if first.claim() { continuation.resume(returning: succeeded) }
        }
        Task {
          try? await Task.sleep(for: .seconds(3))
          if first.claim() { continuation.resume(returning: false) }
        }
      }
      if answered { return }
      try? await Task.sleep(for: .milliseconds(300))
    }
  }

  /// Lets exactly one of two racing tasks resume a continuation.
  final class FirstOutcome: @unchecked Sendable {
    // @unchecked Sendable: `claimed` is only touched with `lock` held.
    private let lock = NSLock()
    private var claimed = false

    func claim() -> Bool {
      lock.lock()
      defer { lock.unlock() }
      if claimed { return false }
      claimed = true
      return true
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
    /// The queue the tasks go to.
    public let queue: RemoteQueue
    /// How many tasks.
    public let count: Int
    /// The keys' prefix.
    public let prefix: String
    /// Each handler's sleep.
    public let sleepMilliseconds: Int
    /// How many results each key got (1 each when routing is exactly-once).
    public private(set) var results: [String: Int] = [:]
    /// The failures, by key.
    public private(set) var failureMessages: [String: String] = [:]
    /// The outputs, by key.
    public private(set) var outputs: [String: EchoKind.Output] = [:]

    /// A job of `count` echo tasks on `queue`.
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
