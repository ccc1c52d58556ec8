import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle
import Testing

extension DatabaseTests {
  /// The queue and the worker as services: graceful shutdown, cancel, and a queue nobody runs.
  @Suite(.timeLimit(.minutes(2)))
  struct ServiceTests {
    /// Heartbeats outlive the shutdown's start: a handler that runs past its lease within the
    /// grace period keeps its row (another worker rescuing expired leases meanwhile finds none)
    /// and its result is stored once.
    @Test func aGracefulShutdownKeepsHeartbeatingHandlersThatFinishWithinTheGracePeriod() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let configuration = TestDatabase.workerConfiguration(
          lease: .seconds(1), heartbeat: .milliseconds(200), grace: .seconds(30))
        let leaving = RemoteWorker(
          queue: queue, id: "leaving", configuration: configuration, logger: TestDatabase.logger)
        TestSupport.registerEcho(on: leaving, client: client)
        let group = ServiceGroup(services: [queue, leaving], logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
          tasks.addTask { try await group.run() }
          let work = RemoteWork<EchoKind>(
            EchoKind.Input(text: "g", sleepMilliseconds: 3_000), queue: queue, idempotencyKey: "g")
          tasks.addTask { _ = try await work.run() }
          try await TestDatabase.eventually("the handler started") {
            try await TestSupport.executions(client, queue: queue.name)["g"] == 1
          }
          await group.triggerGracefulShutdown()
          // Another worker returns expired leases to the queue meanwhile (and would run the row).
          try await TestDatabase.withWorker(queue, id: "rescuer", configuration: configuration) { rescuer in
            try await TestDatabase.eventually("the leaving worker stored its result") {
              leaving.statistics.completed == 1
            }
            #expect(rescuer.statistics.rescued == 0)
          }
          try await tasks.waitForAll()
        }
        #expect(leaving.statistics.stale == 0)
        #expect(leaving.statistics.handedBack == 0)
        #expect(try await TestSupport.executions(client, queue: queue.name) == ["g": 1])
        let row = try await TestDatabase.rows(client, queue: queue.name)["g"]
        #expect(row?.state == "completed")
        #expect(row?.attempt == 1)
      }
    }

    /// Cancelling `run()` stops at once, its handler still running: it hands nothing back (the
    /// row comes back when its lease expires).
    @Test func cancellingTheWorkersRunStopsAtOnce() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "cancelled",
          configuration: TestDatabase.workerConfiguration(lease: .seconds(60), grace: .seconds(600)),
          logger: TestDatabase.logger)
        TestSupport.registerEcho(on: worker, client: client)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
          tasks.addTask { try await worker.run() }
          tasks.addTask {
            _ = try? await RemoteWork<EchoKind>(
              EchoKind.Input(text: "c", sleepMilliseconds: 600_000), queue: queue, idempotencyKey: "c"
            ).run()
          }
          try await TestDatabase.eventually("the handler started") {
            try await TestSupport.executions(client, queue: queue.name)["c"] == 1
          }
          // The suite's time limit fails the test if the worker waited for its 600 s of grace.
          tasks.cancelAll()
          try await tasks.waitForAll()
        }
        #expect(worker.statistics.handedBack == 0)
        #expect(try await TestDatabase.rows(client, queue: queue.name)["c"]?.state == "running")
      }
    }

    /// A job's process that never runs its queue still gets its results: each waiting task
    /// polls its row.
    @Test func withoutTheQueueRunningWaitingTasksPollTheirRows() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "alone", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        TestSupport.registerEcho(on: worker, client: client)
        let group = ServiceGroup(services: [worker], logger: TestDatabase.logger)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
          tasks.addTask { try await group.run() }
          let job = TestSupport.EchoJob(queue: queue, count: 20, prefix: "p")
          try await TestDatabase.run(job)
          #expect(job.results.count == 20)
          #expect(job.results.values.allSatisfy { $0 == 1 })
          await group.triggerGracefulShutdown()
          try await tasks.waitForAll()
        }
      }
    }

    /// Two runs of one queue at once (two services of one process): the second drives nothing
    /// and both end at the shutdown; results are routed meanwhile.
    @Test func aQueueRunTwiceAtOnceRoutesResultsOnce() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withRunningQueue(queue) {
          try await TestDatabase.withWorker(queue) { _ in
            let job = TestSupport.EchoJob(queue: queue, count: 20, prefix: "t")
            try await TestDatabase.run(job)
            #expect(job.results.count == 20)
            #expect(job.results.values.allSatisfy { $0 == 1 })
          }
        }
      }
    }
  }
}
