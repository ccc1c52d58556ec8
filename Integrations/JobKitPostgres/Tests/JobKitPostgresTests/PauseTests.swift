import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// Pausing a queue against the real server: the claim statement gives nothing while the queue
  /// is paused, the pause is the database's (every process sees it), running tasks finish.
  @Suite(.timeLimit(.minutes(2)))
  struct PauseTests {
    @Test func aPausedQueueGivesNoRowToAnyClaimUntilItIsResumed() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let other = try await TestDatabase.makeQueue(client)
        // Another process's object for the same queue.
        let sameName = RemoteQueue(
          client: client, name: queue.name, configuration: queue.configuration, logger: TestDatabase.logger)
        try await Self.insert(client, queue.name, ["a", "b"])
        try await Self.insert(client, queue.name, ["suspect"], suspect: true)
        try await Self.insert(client, other.name, ["c"])
        #expect(try await !queue.isPaused())

        try await queue.pause()
        try await queue.pause()
        #expect(try await queue.isPaused())
        #expect(try await sameName.isPaused())
        #expect(try await !other.isPaused())
        let paused = try await RemoteQueue.pausedQueues(client: client, logger: Logger(label: "test"))
        #expect(paused.keys.contains(queue.name) && !paused.keys.contains(other.name))

        let worker = RemoteWorker(
          queue: sameName, id: "w", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        #expect(try await worker.claim(limit: 10, mayTakeSuspect: true, owner: "o").isEmpty)
        #expect(try await worker.claim(limit: 10, mayTakeSuspect: false, owner: "o").isEmpty)
        let otherWorker = RemoteWorker(
          queue: other, id: "w", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        #expect(try await otherWorker.claim(limit: 10, mayTakeSuspect: true, owner: "o").map(\.key) == ["c"])
        #expect(try await TestDatabase.rows(client, queue: queue.name).values.allSatisfy { $0.state == "available" })

        try await sameName.resume()
        try await sameName.resume()
        #expect(try await !queue.isPaused())
        // The suspect alone first, then the others.
        #expect(try await worker.claim(limit: 10, mayTakeSuspect: true, owner: "o").map(\.key) == ["suspect"])
        #expect(try await worker.claim(limit: 10, mayTakeSuspect: false, owner: "o").map(\.key).sorted() == ["a", "b"])
      }
    }

    @Test func aRunningTaskFinishesWhileThePausedQueueStartsNoOther() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { worker in
          try await Self.insert(client, queue.name, ["long"], sleepMilliseconds: 1_000)
          try await TestDatabase.eventually("the long task runs") {
            try await TestDatabase.rows(client, queue: queue.name)["long"]?.state == "running"
          }
          try await queue.pause()
          try await Self.insert(client, queue.name, ["waits"])
          try await TestDatabase.eventually("the running task completed") {
            try await TestDatabase.rows(client, queue: queue.name)["long"]?.state == "completed"
          }
          // Two claim statements that began after the pause: the worker looked, and took nothing.
          let looked = worker.state.withLock { $0.claimStatements }
          try await TestDatabase.eventually("the worker claimed twice more") {
            worker.state.withLock { $0.claimStatements } >= looked + 2
          }
          #expect(try await TestDatabase.rows(client, queue: queue.name)["waits"]?.state == "available")
          #expect(worker.statistics.claimed == 1)

          try await queue.resume()
          try await TestDatabase.eventually("the waiting task completed after the resume") {
            try await TestDatabase.rows(client, queue: queue.name)["waits"]?.state == "completed"
          }
        }
      }
    }

    /// Rows of `queue` with the echo kind's input, available now.
    static func insert(
      _ client: PostgresClient, _ queue: String, _ keys: [String], sleepMilliseconds: Int = 0, suspect: Bool = false
    ) async throws {
      for key in keys {
        let input = try JSONEncoder().encode(EchoKind.Input(text: key, sleepMilliseconds: sleepMilliseconds))
        try await client.query(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, suspect)
          VALUES (\(queue), 'echo', \(key), \(input), 3, \(suspect))
          """)
      }
    }
  }
}
