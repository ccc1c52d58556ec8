import Foundation
import JobKit
import JobKitPostgres
import PostgresNIO

/// A durable job: a tree of `width` children per node, `depth` levels of `TreeKind` jobs above
/// `EchoKind` leaves. Its handler runs `TreeJob`, which makes its children in three places: in
/// its `main()`, in a nested job, and in the callback of its first child's result. Its output
/// is the texts of its leaves, sorted (`TestSupport.expectedLeaves` computes them in process).
public enum TreeKind: RemoteTaskKind {
  /// A node of the tree.
  public struct Input: Codable, Sendable, Equatable {
    /// Levels of `TreeKind` jobs from this one down (1: its children are leaves).
    public var depth: Int
    /// Children per node.
    public var width: Int
    /// The node's label; a child's is the label, `/`, its index.
    public var label: String
    /// How long each leaf's handler sleeps, but the first of each node's leaves, which answers
    /// at once.
    public var leafSleepMilliseconds: Int
    /// Each job also runs a durable step (key `step`), whose value `LABEL#step` joins its leaves.
    public var steps: Bool?

    /// A node.
    public init(depth: Int, width: Int, label: String, leafSleepMilliseconds: Int = 0, steps: Bool? = nil) {
      self.depth = depth
      self.width = width
      self.label = label
      self.leafSleepMilliseconds = leafSleepMilliseconds
      self.steps = steps
    }
  }

  /// The texts of the node's leaves, sorted.
  public typealias Output = [String]
  /// The kind's name in the table.
  public static let name = "tree"
}

extension TestSupport {
  /// The output of a `TreeKind` node computed in process.
  public static func expectedLeaves(_ input: TreeKind.Input) -> [String] {
    let step = input.steps == true ? [input.label + "#step"] : []
    return
      (step
      + (0..<input.width).flatMap { index -> [String] in
        let label = "\(input.label)/\(index)"
        guard input.depth > 1 else { return [label] }
        var child = input
        child.depth -= 1
        child.label = label
        return expectedLeaves(child)
      }).sorted()
  }

  /// Registers `TreeKind` on `worker`, recording each run as `EchoKind`'s handler does. Its
  /// leaves go to `leafQueue` (by default the worker's queue), whose workers need `EchoKind`.
  /// With `history`, each start, delivery and step body is recorded there too.
  public static func registerTree(
    on worker: RemoteWorker, client: PostgresClient, leafQueue: RemoteQueue? = nil, history: CrashHistoryLog? = nil
  ) {
    let queue = worker.queue
    let leafQueue = leafQueue ?? queue
    worker.register(TreeKind.self) { input, context in
      history?.record {
        CrashHistory.Event.start(key: context.idempotencyKey, attempt: context.attempt, time: $0, pid: $1)
      }
      if history != nil {
        // The crash test restarts the server: its handlers record their runs in the history.
        let job = TreeJob(queue: queue, leafQueue: leafQueue, input: input)
        job.history = history.map { (log: $0, key: context.idempotencyKey, attempt: context.attempt) }
        try await job.run()
        return job.leaves
      }
      _ = try await client.query(
        """
        INSERT INTO jobkit_test_executions (queue, key, attempt, worker)
        VALUES (\(queue.name), \(context.idempotencyKey), \(Int32(context.attempt)), \(context.workerID))
        """)
      let job = TreeJob(queue: queue, leafQueue: leafQueue, input: input)
      try await job.run()
      return job.leaves
    }
  }

  /// The job a `TreeKind` handler runs.
  public final class TreeJob: JobController, @unchecked Sendable {
    // @unchecked Sendable: `collected` is behind `lock`; `history` is set before the job runs.
    let queue: RemoteQueue
    let leafQueue: RemoteQueue
    let input: TreeKind.Input
    private let lock = NSLock()
    private var collected: [String] = []
    /// Where deliveries and step bodies are recorded, with the job's row key and attempt (set
    /// before the job runs).
    var history: (log: CrashHistoryLog, key: String, attempt: Int)?

    /// The job of node `input`: its jobs on `queue`, its leaves on `leafQueue`.
    public init(queue: RemoteQueue, leafQueue: RemoteQueue, input: TreeKind.Input) {
      self.queue = queue
      self.leafQueue = leafQueue
      self.input = input
      super.init()
    }

    /// The leaves gathered, sorted.
    public var leaves: [String] {
      lock.withLock { collected.sorted() }
    }

    public override func main() {
      if input.steps == true { trackStep() }
      guard input.width > 0 else { return }
      // The first child from main(), the second from a nested job, the rest from a callback.
      track(child: 0) { [self] in
        for index in 2..<max(2, input.width) { track(child: index, in: self) }
      }
      if input.width > 1 {
        trackAndQueue(
          Spawner { job in
            Self.track(child: 1, of: self, in: job)
          })
      }
    }

    /// The job's durable step: its value joins the leaves.
    private func trackStep() {
      let label = input.label
      let history = history
      let step = DurableStep(queue: queue, idempotencyKey: "step") { () async throws -> String in
        if let history {
          let key = history.key + CrashHistory.separator + "step"
          history.log.record {
            CrashHistory.Event.stepBody(key: key, parentAttempt: history.attempt, time: $0, pid: $1)
          }
        }
        return label + "#step"
      }
      trackAndQueue(resultOf: step) { [self] result in
        switch result {
        case .success(let value):
          Self.recordDelivery(of: "step", value: value, in: self)
          lock.withLock { collected.append(value) }
        case .failure(let error):
          fail(error)
        }
      }
    }

    /// Records that child `local`'s result `value` reached `node`'s callbacks.
    static func recordDelivery(of local: String, value: String, in node: TreeJob) {
      guard let history = node.history else { return }
      history.log.record {
        CrashHistory.Event.delivery(
          parent: history.key, parentAttempt: history.attempt, child: history.key + CrashHistory.separator + local,
          value: value, time: $0, pid: $1)
      }
    }

    private func track(child index: Int, then: @escaping @Sendable () -> Void = {}) {
      Self.track(child: index, of: self, in: self, then: then)
    }

    private func track(child index: Int, in job: JobController) {
      Self.track(child: index, of: self, in: job)
    }

    /// Makes child `index` of `node` in `job` (the node's job or one nested in it).
    static func track(
      child index: Int, of node: TreeJob, in job: JobController, then: @escaping @Sendable () -> Void = {}
    ) {
      let label = "\(node.input.label)/\(index)"
      let key = "c\(index)"
      let collect: @Sendable (Result<[String], any Error>) -> Void = { result in
        switch result {
        case .success(let leaves):
          recordDelivery(of: key, value: leaves.joined(separator: ","), in: node)
          node.lock.withLock { node.collected += leaves }
          then()
        case .failure(let error):
          node.fail(error)
        }
      }
      if node.input.depth > 1 {
        var input = node.input
        input.depth -= 1
        input.label = label
        job.trackAndQueue(resultOf: RemoteWork<TreeKind>(input, queue: node.queue, idempotencyKey: key)) { result in
          collect(result)
        }
      } else {
        let input = EchoKind.Input(text: label, sleepMilliseconds: index == 0 ? 0 : node.input.leafSleepMilliseconds)
        job.trackAndQueue(resultOf: RemoteWork<EchoKind>(input, queue: node.leafQueue, idempotencyKey: key)) { result in
          collect(result.map { [$0.text] })
        }
      }
    }
  }

  /// A nested job that runs `body` in its `main()`.
  final class Spawner: JobController, @unchecked Sendable {
    // @unchecked Sendable: `body` is immutable.
    let body: @Sendable (JobController) -> Void

    init(_ body: @escaping @Sendable (JobController) -> Void) {
      self.body = body
      super.init()
    }

    override func main() {
      body(self)
    }
  }
}

/// A durable job with a time limit: its handler runs a job whose `timeLimit` is the input's, and
/// that waits for one `EchoKind` leaf (key `leaf`) sleeping the input's time.
public enum LimitedKind: RemoteTaskKind {
  /// The limit and the leaf's sleep.
  public struct Input: Codable, Sendable, Equatable {
    /// The job's time limit.
    public var limitMilliseconds: Int
    /// How long the leaf sleeps.
    public var leafSleepMilliseconds: Int

    /// An input.
    public init(limitMilliseconds: Int, leafSleepMilliseconds: Int) {
      self.limitMilliseconds = limitMilliseconds
      self.leafSleepMilliseconds = leafSleepMilliseconds
    }
  }

  /// The leaf's text.
  public typealias Output = String
  /// The kind's name in the table.
  public static let name = "limited"
}

extension TestSupport {
  /// Registers `LimitedKind` on `worker`; its leaf goes to `leafQueue`.
  public static func registerLimited(on worker: RemoteWorker, leafQueue: RemoteQueue) {
    worker.register(LimitedKind.self) { input, _ in
      let job = LeafJob(queue: leafQueue, sleepMilliseconds: input.leafSleepMilliseconds)
      job.timeLimit = .milliseconds(input.limitMilliseconds)
      try await job.run()
      return job.text
    }
  }

  /// A job that waits for one sleeping `EchoKind` leaf.
  final class LeafJob: JobController, @unchecked Sendable {
    // @unchecked Sendable: `received` is behind its lock; the rest is immutable.
    let queue: RemoteQueue
    let sleepMilliseconds: Int
    private let received = NSLock()
    private var answer = ""

    init(queue: RemoteQueue, sleepMilliseconds: Int) {
      self.queue = queue
      self.sleepMilliseconds = sleepMilliseconds
      super.init()
    }

    var text: String {
      received.withLock { answer }
    }

    override func main() {
      let input = EchoKind.Input(text: "leaf", sleepMilliseconds: sleepMilliseconds)
      trackAndQueue(resultOf: RemoteWork<EchoKind>(input, queue: queue, idempotencyKey: "leaf")) { [self] result in
        switch result {
        case .success(let output): received.withLock { answer = output.text }
        case .failure(let error): fail(error)
        }
      }
    }
  }
}
