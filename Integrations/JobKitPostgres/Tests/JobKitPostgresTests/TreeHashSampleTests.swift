import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import Testing

@testable import TreeHash

extension DatabaseTests {
  /// The tree-hash sample's distributed mode against the real server.
  @Suite(.timeLimit(.minutes(2)))
  struct TreeHashSampleTests {
    static func hash(_ root: String, leaves: any LeafHashing) async throws -> String {
      let job = TreeHashJob(root: root, leaves: leaves)
      try await TestDatabase.run(job, timeout: .seconds(90))
      return try #require(job.rootHash)
    }

    /// A run with the same run id after a file changed hashes the new content: a leaf's key
    /// names the file's content, not only its path.
    @Test func aChangedFileIsHashedAnewUnderTheSameRunID() async throws {
      let root = FileManager.default.temporaryDirectory.appendingPathComponent("tree-\(UUID().uuidString)")
        .resolvingSymlinksInPath().path
      try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(atPath: root) }
      try Data("first".utf8).write(to: URL(fileURLWithPath: root + "/sub/a"))
      try Data("other".utf8).write(to: URL(fileURLWithPath: root + "/b"))
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "hasher", configuration: TestDatabase.workerConfiguration(), logger: Logger(label: "test"))
        worker.register(FileHash.self) { input, _ in try FileHash.hash(input) }
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        let leaves = RemoteLeafHashing(queue: queue, runID: "same-run", maxQueued: 8)
        let before = try await Self.hash(root, leaves: leaves)
        #expect(before == (try await Self.hash(root, leaves: LocalLeafHashing())))
        // Same size, new content and modification time.
        try Data("fresh".utf8).write(to: URL(fileURLWithPath: root + "/sub/a"))
        let modified = Date().addingTimeInterval(5)
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: root + "/sub/a")
        let after = try await Self.hash(root, leaves: leaves)
        #expect(after != before)
        #expect(after == (try await Self.hash(root, leaves: LocalLeafHashing())))
      }
    }
  }
}
