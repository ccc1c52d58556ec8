import Foundation
import JobKit
import JobKitPostgres
import PostgresNIO
import RemoteTestSupport
import Testing

#if canImport(Glibc)
  import Glibc
#endif

extension DatabaseTests {
  /// Worker processes (`jobkit-remote-test-worker`) killed, stopped and resumed, the server
  /// restarted, the job's own process killed: nothing is lost, each result is accepted once.
  /// Serialized: each test runs its own processes, and the server restart concerns every client.
  @Suite
  struct MultiProcessTests {
    @Test func tenThousandTasksOnFourWorkersRunAndRouteExactlyOnce() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let workers = try await WorkerProcesses.start(
          4, queue: queue.name, extra: ["--batch", "64", "--max-concurrent", "64"])
        defer { workers.stopAll() }
        let job = TestSupport.EchoJob(queue: queue, count: 10_000, prefix: "n")
        try await TestDatabase.run(job)
        #expect(job.results.count == 10_000)
        #expect(job.results.values.allSatisfy { $0 == 1 })
        #expect(job.failureMessages.isEmpty)
        #expect(job.outputs.values.allSatisfy { $0.attempt == 1 })
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == 10_000)
        #expect(executions.values.allSatisfy { $0 == 1 })
        // Every worker took part.
        let workersUsed = Set(job.outputs.values.map(\.worker))
        #expect(workersUsed.count == 4)
      }
    }

    @Test func aKilledWorkersTasksRunAgainElsewhereAfterTheLease() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let workers = try await WorkerProcesses.start(2, queue: queue.name, extra: ["--max-concurrent", "8"])
        defer { workers.stopAll() }
        let job = TestSupport.EchoJob(queue: queue, count: 120, prefix: "k", sleepMilliseconds: 300)
        let running = Task { try await TestDatabase.run(job) }
        try await TestDatabase.eventually("the first worker runs tasks") {
          try await Self.running(client, queue: queue.name, owner: "w0") >= 4
        }
        workers.processes[0].signal(SIGKILL)
        // Rows it held when it died (it can hold more, never fewer, than it ran).
        let victimRunning = try await Self.running(client, queue: queue.name, owner: "w0")
        try await running.value
        #expect(job.results.count == 120)
        #expect(job.results.values.allSatisfy { $0 == 1 })
        #expect(job.failureMessages.isEmpty)
        let rerun = job.outputs.values.filter { $0.attempt == 2 }
        #expect(rerun.count >= victimRunning)
        #expect(rerun.allSatisfy { $0.worker == "w1" })
      }
    }

    @Test func aStoppedWorkerPastItsLeaseCannotCompleteTheTaskAnotherClaimed() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let first = try await WorkerProcesses.start(1, queue: queue.name, prefix: "stale")
        defer { first.stopAll() }
        let work = RemoteWork<EchoKind>(
          EchoKind.Input(text: "s", sleepMilliseconds: 3_000), queue: queue, idempotencyKey: "s")
        let running = Task { try await work.run() }
        try await TestDatabase.eventually("the first worker started the task") {
          try await TestSupport.executions(client, queue: queue.name)["s"] == 1
        }
        first.processes[0].signal(SIGSTOP)
        let second = try await WorkerProcesses.start(1, queue: queue.name, prefix: "fresh")
        defer { second.stopAll() }
        try await TestDatabase.eventually("the second worker claimed it (attempt 2)") {
          try await TestSupport.executions(client, queue: queue.name)["s"] == 2
        }
        first.processes[0].signal(SIGCONT)
        let output = try await running.value
        #expect(output.worker == "fresh0")
        #expect(output.attempt == 2)
        // The stale worker's late result was rejected: its statistics say so when it stops.
        try await TestDatabase.eventually("the stale worker logged its rejected result") {
          first.processes[0].standardError.contains("stale result rejected")
        }
        first.processes[0].signal(SIGTERM)
        let line = try await first.processes[0].waitForLine("stopped")
        #expect(line.contains("stale=1"))
        #expect(line.contains("completed=0"))
        let rows = try await TestDatabase.rows(client, queue: queue.name)
        #expect(rows["s"]?.state == "completed")
        #expect(rows["s"]?.attempt == 2)
      }
    }

    @Test func aServerRestartLosesNothing() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let workers = try await WorkerProcesses.start(2, queue: queue.name)
        defer { workers.stopAll() }
        let job = TestSupport.EchoJob(queue: queue, count: 400, prefix: "r", sleepMilliseconds: 20)
        let running = Task { try await TestDatabase.run(job) }
        try await TestDatabase.eventually("tasks ran") {
          try await TestSupport.executions(client, queue: queue.name).count >= 40
        }
        #expect(ServerControl.run("-m", "fast", "restart") == 0)
        try await running.value
        #expect(job.results.count == 400)
        #expect(job.results.values.allSatisfy { $0 == 1 })
        #expect(job.failureMessages.isEmpty)
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == 400)
      }
    }

    @Test func aJobRerunAfterItsProcessDiedSkipsTheCompletedTasks() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // Two tasks at a time per worker, 50 ms each: the 200 tasks take 2.5 s, so tasks are left
        // when the job's process is killed after 40 (its rows outlive it: the workers go on with
        // those they claimed). With the default 16 at a time they took 0.3 s, and a kill that
        // came a little late found every task done (CI saw it once).
        let workers = try await WorkerProcesses.start(2, queue: queue.name, extra: ["--max-concurrent", "2"])
        defer { workers.stopAll() }
        let arguments = [
          "job", "--database", TestDatabase.url ?? "", "--queue", queue.name, "--count", "200", "--prefix", "j",
          "--sleep", "50",
        ]
        let first = try ChildProcess(arguments)
        defer { first.stop() }
        try await TestDatabase.eventually("some tasks completed") {
          try await Self.completed(client, queue: queue.name) >= 40
        }
        first.signal(SIGKILL)
        _ = try await first.waitForExit()
        let completedBefore = try await Self.completed(client, queue: queue.name)
        #expect(completedBefore < 200)

        let second = try ChildProcess(arguments)
        defer { second.stop() }
        let status = try await second.waitForExit(timeout: .seconds(120))
        #expect(status == 0, "\(second.standardOutput) \(second.standardError)")
        #expect(second.standardOutput.contains("done results=200 failures=0 duplicates=0"))
        let executions = try await TestSupport.executions(client, queue: queue.name)
        #expect(executions.count == 200)
        #expect(executions.values.allSatisfy { $0 == 1 })
      }
    }

    @Test func wrongConnectionSettingsGiveOneClearErrorAndANonZeroExit() async throws {
      let refused = try ChildProcess([
        "worker", "--database", "postgres://someone:s3cr3t-pw@127.0.0.1:1/db", "--queue", "q", "--connect-timeout", "5",
      ])
      let status = try await refused.waitForExit()
      #expect(status != 0)
      // One error line of its own (postgres-nio may log warnings before it).
      let lines = refused.standardError.split(separator: "\n").filter { $0.hasPrefix("jobkit-remote-test-worker:") }
      #expect(lines.count == 1, "\(refused.standardError)")
      #expect(refused.standardError.contains("cannot use the database"))
      #expect(!refused.standardError.contains("s3cr3t-pw"))
      #expect(!refused.standardOutput.contains("s3cr3t-pw"))

      let invalid = try ChildProcess([
        "worker", "--database", "postgres://someone:s3cr3t-pw@db.example/db?sslmode=bogus", "--queue", "q",
      ])
      let checked1 = try await invalid.waitForExit()
      #expect(checked1 == 2)
      #expect(invalid.standardError.contains("sslmode 'bogus' is not supported"))
      #expect(!invalid.standardError.contains("s3cr3t-pw"))
    }

    static func running(_ client: PostgresClient, queue: String, owner: String) async throws -> Int {
      var count = 0
      for try await (value) in try await client.query(
        """
        SELECT count(*)::integer FROM jobkit_remote_tasks
        WHERE queue = \(queue) AND state = 'running' AND owner LIKE \(owner + "/%")
        """
      ).decode(Int32.self) {
        count = Int(value)
      }
      return count
    }

    static func completed(_ client: PostgresClient, queue: String) async throws -> Int {
      var count = 0
      for try await (value) in try await client.query(
        "SELECT count(*)::integer FROM jobkit_remote_tasks WHERE queue = \(queue) AND state = 'completed'"
      ).decode(Int32.self) {
        count = Int(value)
      }
      return count
    }
  }
}
