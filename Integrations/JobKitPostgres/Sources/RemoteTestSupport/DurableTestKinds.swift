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

    /// A node.
    public init(depth: Int, width: Int, label: String, leafSleepMilliseconds: Int = 0) {
      self.depth = depth
      self.width = width
      self.label = label
      self.leafSleepMilliseconds = leafSleepMilliseconds
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
    (0..<input.width).flatMap { index -> [String] in
      let label = "\(input.label)/\(index)"
      guard input.depth > 1 else { return [label] }
      var child = input
      child.depth -= 1
      child.label = label
      return expectedLeaves(child)
    }.sorted()
  }

  /// Registers `TreeKind` on `worker`, recording each run as `EchoKind`'s handler does. Its
  /// leaves go to `leafQueue` (by default the worker's queue), whose workers need `EchoKind`.
  public static func registerTree(on worker: RemoteWorker, client: PostgresClient, leafQueue: RemoteQueue? = nil) {
    let queue = worker.queue
    let leafQueue = leafQueue ?? queue
    worker.register(TreeKind.self) { input, context in
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
    // @unchecked Sendable: `collected` is behind `lock`.
    let queue: RemoteQueue
    let leafQueue: RemoteQueue
    let input: TreeKind.Input
    private let lock = NSLock()
    private var collected: [String] = []

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
