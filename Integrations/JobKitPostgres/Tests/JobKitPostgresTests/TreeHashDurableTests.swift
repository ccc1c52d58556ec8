import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import Testing

@testable import TreeHash

extension DatabaseTests {
  /// The tree-hash sample's durable mode against the real server: the tree's job as a remote
  /// task whose handler runs `TreeHashJob` with remote leaves. (Its kill -9 run is in
  /// Benchmarks/Remote/check-tree-hash.sh.)
  @Suite(.timeLimit(.minutes(2)))
  struct TreeHashDurableTests {
    @Test func aSubmittedTreeGivesWhatTheInProcessRunPrints() async throws {
      let root = FileManager.default.temporaryDirectory.appendingPathComponent("tree-\(UUID().uuidString)")
        .resolvingSymlinksInPath().path
      try FileManager.default.createDirectory(atPath: root + "/sub/deeper", withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: root) }
      for (index, path) in ["a", "sub/b", "sub/deeper/c", "sub/deeper/d e"].enumerated() {
        try Data(repeating: UInt8(index), count: 100 * index).write(to: URL(fileURLWithPath: root + "/" + path))
      }
      let local = TreeHashJob(root: root, leaves: LocalLeafHashing())
      try await TestDatabase.run(local, timeout: .seconds(60))
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        var configuration = TestDatabase.workerConfiguration()
        // Enough slots: the job's handler waits for leaves that need slots of their own.
        configuration.maxConcurrent = 3
        let worker = RemoteWorker(queue: queue, id: "tree", configuration: configuration, logger: Logger(label: "test"))
        worker.register(FileHash.self, maxConcurrent: 2) { input, _ in try FileHash.hash(input) }
        worker.register(TreeHashTree.self, maxConcurrent: 1) { input, _ in
          try await TreeHashTree.run(input, queue: queue)
        }
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        let handle = try await queue.enqueue(
          TreeHashTree.self, TreeHashTree.Input(root: root, runID: "job-1", maxQueued: 8), idempotencyKey: "job-1")
        let output = try await handle.result()
        #expect(output.rootHash == local.rootHash)
        #expect(output.directoryHashes == local.directoryHashes)
        // Each file's leaf is a row whose key starts with the job's key.
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(rows.count == 5)
        #expect(rows.keys.allSatisfy { $0.hasPrefix("job-1") })
      }
    }

    @Test func theCommandLineTakesSubmitAndResult() throws {
      let submit = try Options.parse(["submit", "--database", "postgres://x", "--concurrency", "4", "dir"])
      #expect(submit.mode == .submit(directory: "dir"))
      #expect(submit.concurrency == 4)
      let result = try Options.parse(["result", "--database", "postgres://x", "--dirs", "KEY"])
      #expect(result.mode == .result(key: "KEY"))
      #expect(result.printsDirectories)
      #expect(throws: UsageError.self) { try Options.parse(["result", "KEY"]) }
      #expect(throws: UsageError.self) { try Options.parse(["submit", "--database", "postgres://x"]) }
    }
  }
}
