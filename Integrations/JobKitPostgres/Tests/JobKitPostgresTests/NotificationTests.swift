import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// The schema's notifications: one per statement, naming every row it made final.
  @Suite
  struct NotificationTests {
    /// A worker stores its batch's outcomes with one statement, whose one notification names
    /// every row; the job gets each result from it (its poll interval is an hour).
    @Test func theFinalRowsOfOneStatementReachTheirWaitersWithoutPolling() async throws {
      try await TestDatabase.withClient { client in
        var configuration = RemoteQueue.Configuration()
        configuration.pollInterval = .seconds(3_600)
        let queue = RemoteQueue(
          client: client, name: TestDatabase.uniqueName("notify"), configuration: configuration,
          logger: TestDatabase.logger)
        try await queue.migrate()
        try await TestSupport.prepare(client)
        let channel = try await Self.doneChannel(client, queue: queue.name)
        let payloads = Locked<[String]>([])
        try await withThrowingTaskGroup(of: Void.self) { listening in
          listening.addTask {
            try await client.withConnection { connection in
              try await connection.listen(on: channel) { notifications in
                for try await notification in notifications {
                  payloads.withLock { $0.append(notification.payload) }
                }
              }
            }
          }
          try await TestDatabase.withWorker(queue) { worker in
            let job = TestSupport.EchoJob(queue: queue, count: 64, prefix: "n")
            try await TestDatabase.run(job, timeout: .seconds(60))
            #expect(job.results.count == 64)
            #expect(job.results.values.allSatisfy { $0 == 1 })
            #expect(job.failureMessages.isEmpty)
            #expect(worker.statistics.completed == 64)
          }
          listening.cancelAll()
        }
        let ids = payloads.withLock { $0 }.flatMap { $0.split(separator: ",") }
        #expect(ids.count == 64)
        #expect(Set(ids).count == 64)
        // Batches of up to 16 rows: fewer notifications than rows.
        #expect(payloads.withLock { $0.count } < 64)
      }
    }

    static func doneChannel(_ client: PostgresClient, queue: String) async throws -> String {
      for try await (hash) in try await client.query("SELECT md5(\(queue))", logger: TestDatabase.logger)
        .decode(String.self)
      {
        return "jk_\(hash)_done"
      }
      throw CancellationError()
    }
  }
}
