import Foundation
import JobKit
import JobKitPostgres
import PostgresNIO

/// The remote task kind of `tree-hash`'s durable mode: a whole tree, as a ``TreeHashJob`` that a
/// worker runs with its leaves as ``FileHash`` remote tasks. `tree-hash submit` inserts one,
/// `tree-hash result` awaits it (``RemoteTaskHandle``).
///
/// The handler is the job's run and nothing more (``run(_:queue:)``). A worker that dies while
/// it runs the job loses its lease; another worker claims the row and runs the job again. The
/// leaves' keys start with the job's key, so the new run attaches to the leaves the first run
/// created: hashed files give back their stored hash, running ones are awaited where they run.
enum TreeHashTree: RemoteTaskKind {
  /// One tree.
  struct Input: Codable, Sendable, Equatable {
    /// The tree's root, an absolute path with symbolic links resolved.
    var root: String
    /// The prefix of the leaves' keys: the job's own key.
    var runID: String
    /// The most leaves the job keeps queued or running at once.
    var maxQueued: Int
  }

  /// What `tree-hash DIR` prints, as data.
  struct Output: Codable, Sendable, Equatable {
    /// The root's hash.
    var rootHash: String
    /// Each directory's hash by its path relative to the root (`.` for the root).
    var directoryHashes: [String: String]
  }

  static let name = "tree-hash.tree"

  /// The worker's handler: the job, with its leaves on `queue`'s workers.
  static func run(_ input: Input, queue: RemoteQueue) async throws -> Output {
    let leaves = RemoteLeafHashing(queue: queue, runID: input.runID, maxQueued: max(1, input.maxQueued))
    let job = TreeHashJob(root: input.root, leaves: leaves)
    try await job.run()
    guard let rootHash = job.rootHash else {
      throw TreeHashError(path: input.root, message: "the job ended without the root's hash")
    }
    return Output(rootHash: rootHash, directoryHashes: job.directoryHashes)
  }
}

/// `tree-hash submit --database URL DIR`: inserts the tree's job and returns its key (a new one
/// each time: a key names one submitted run).
func submitTree(root: String, options: Options) async throws -> String {
  let key = "tree-hash-\(UUID().uuidString.lowercased())"
  let input = TreeHashTree.Input(root: root, runID: key, maxQueued: options.concurrency ?? 256)
  try await withRemoteQueue(options) { queue in
    _ = try await queue.enqueue(TreeHashTree.self, input, idempotencyKey: key)
  }
  return key
}

/// `tree-hash result --database URL KEY`: waits for the job with `key`, submitted by any process.
func awaitTree(key: String, options: Options) async throws -> TreeHashTree.Output {
  try await withRemoteQueue(options) { queue in
    try await queue.handle(for: TreeHashTree.self, idempotencyKey: key).result()
  }
}

/// Runs `body` with the queue of `options`, its client running beside it, its connection
/// settings checked and its schema migrated.
func withRemoteQueue<Result: Sendable>(
  _ options: Options, _ body: @Sendable (RemoteQueue) async throws -> Result
) async throws -> Result {
  bootstrapLogging
  let client = PostgresClient(
    configuration: try .init(url: options.databaseURL ?? ""), backgroundLogger: clientLogger())
  return try await withThrowingTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    let queue = RemoteQueue(client: client, name: options.queueName, configuration: .init(), logger: clientLogger())
    // Hands finished rows to the tasks waiting in this process (one LISTEN connection).
    group.addTask { try await queue.run() }
    do {
      try await PostgresClient.Configuration.checkConnection(url: options.databaseURL ?? "", logger: clientLogger())
      try await queue.migrate()
      let result = try await body(queue)
      group.cancelAll()
      return result
    } catch {
      group.cancelAll()
      throw error
    }
  }
}
