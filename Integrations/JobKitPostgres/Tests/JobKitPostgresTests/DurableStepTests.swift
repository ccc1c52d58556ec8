import Foundation
import JobKit
import JobKitPostgres
import PostgresNIO
import RemoteTestSupport
import Testing

extension DatabaseTests {
  /// Durable local steps: a step's result is stored as a child row of its job and given back to
  /// the job's next run without running the body again.
  @Suite
  struct DurableStepTests {
    @Test func aStepsBodyRunsOnceAcrossTheRunsOfItsJob() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let worker = RemoteWorker(
          queue: queue, id: "worker", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger)
        worker.register(StepKind.self) { _, context in
          let job = StepJob(queue: queue, client: client)
          try await job.run()
          // The first run fails after its step: the second run gets the step's stored result.
          if context.attempt == 1 { throw FirstRunFails() }
          return job.value ?? "none"
        }
        let running = Task { try await worker.run() }
        defer { running.cancel() }
        let output = try await RemoteWork<StepKind>("go", queue: queue, idempotencyKey: "p").run()
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions["step-body"] == 1)
        let rows = try await client.query(
          """
          SELECT s.output, s.parent_id = p.id, s.kind FROM jobkit_remote_tasks s
          JOIN jobkit_remote_tasks p ON p.queue = s.queue AND p.idempotency_key = 'p'
          WHERE s.queue = \(queue.name) AND s.idempotency_key = 'p' || chr(31) || 's'
          """)
        var found = 0
        for try await (stored, isChild, kind) in rows.decode((Data, Bool, String).self) {
          found += 1
          #expect(try JSONDecoder().decode(String.self, from: stored) == output)
          #expect(isChild)
          #expect(kind == "jobkit.step")
        }
        #expect(found == 1)
      }
    }

    @Test func aStepOutsideAJobStoresItsResultUnderTheQueuesKey() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await DurableStep(queue: queue, idempotencyKey: "once") { UUID().uuidString }.run()
        let second = try await DurableStep(queue: queue, idempotencyKey: "once") { UUID().uuidString }.run()
        #expect(first == second)
      }
    }
  }
}

/// A durable job with one durable step.
enum StepKind: RemoteTaskKind {
  typealias Input = String
  typealias Output = String
  static let name = "step-job"
}

/// Runs a step whose body records its run and returns a value that differs on every run.
final class StepJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `value` is written by the job's callback, read after it finished.
  let queue: RemoteQueue
  let client: PostgresClient
  var value: String?

  init(queue: RemoteQueue, client: PostgresClient) {
    self.queue = queue
    self.client = client
    super.init()
  }

  override func main() {
    let queue = queue
    let client = client
    let step = DurableStep(queue: queue, idempotencyKey: "s") { () async throws -> String in
      _ = try await client.query(
        """
        INSERT INTO jobkit_test_executions (queue, key, attempt, worker)
        VALUES (\(queue.name), 'step-body', 1, 'job')
        """)
      return UUID().uuidString
    }
    trackAndQueue(resultOf: step) { result in
      switch result {
      case .success(let value): self.value = value
      case .failure(let error): self.fail(error)
      }
    }
  }
}

/// The first run of `StepKind`'s handler fails after its step.
struct FirstRunFails: Error {}
