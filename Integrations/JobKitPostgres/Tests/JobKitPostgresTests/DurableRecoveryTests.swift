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
  /// A durable job's process killed (`kill -9`): another worker runs the job again, attached to
  /// its children's rows.
  @Suite
  struct DurableRecoveryTests {
    @Test func aKilledJobRunsAgainElsewhereAndAttachesToItsChildren() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        // The leaves run in this process, on a queue of their own; the tree's jobs in worker
        // processes.
        let leafQueue = try await TestDatabase.makeQueue(client)
        let leavesRun = Self.runLeaves(of: leafQueue, client: client)
        defer { leavesRun.cancel() }
        let extra = ["--kinds", "tree", "--leaf-queue", leafQueue.name]
        let first = try await WorkerProcesses.start(1, queue: queue.name, prefix: "first", extra: extra)
        defer { first.stopAll() }
        let input = TreeKind.Input(depth: 2, width: 3, label: "r", leafSleepMilliseconds: 8_000)
        let root = Task { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "r").run() }
        defer { root.cancel() }
        // The first leaf of each job answers at once, the others sleep; a job's third child is
        // made when its first answered. Kill the jobs' process when the root and its first two
        // jobs run, 2 leaves are done and 4 run (the root's third job is not made yet).
        try await TestDatabase.eventually("3 jobs running, 2 leaves completed, 4 running") {
          let jobs = try await TestDatabase.rows(client, queue: queue.name).values.map(\.state)
          let leaves = try await TestDatabase.rows(client, queue: leafQueue.name).values.map(\.state)
          return leaves.filter { $0 == "completed" }.count == 2 && leaves.filter { $0 == "running" }.count == 4
            && jobs.count == 3 && jobs.allSatisfy { $0 == "running" }
        }
        first.processes[0].signal(SIGKILL)
        let second = try await WorkerProcesses.start(1, queue: queue.name, prefix: "second", extra: extra)
        defer { second.stopAll() }
        let output = try await withThrowingTaskGroup(of: [String]?.self) { group in
          group.addTask { try await root.value }
          group.addTask {
            try await Task.sleep(for: .seconds(60))
            return nil
          }
          let output = try await group.next() ?? nil
          group.cancelAll()
          return output
        }
        #expect(output == TestSupport.expectedLeaves(input))
        let executions = try await TestSupport.executions(client, queue: queue.name)
          .merging(TestSupport.executions(client, queue: leafQueue.name)) { $0 + $1 }
        let separator = "\u{1F}"
        // The jobs that ran in the killed process ran twice, the third once (made by the new
        // run); every leaf once: the completed ones gave their results, the running ones were
        // awaited where they ran.
        #expect(executions["r"] == 2)
        for job in 0..<3 {
          let jobKey = "r" + separator + "c\(job)"
          #expect(executions[jobKey] == (job == 2 ? 1 : 2), "\(jobKey)")
          for leaf in 0..<3 {
            #expect(executions[jobKey + separator + "c\(leaf)"] == 1)
          }
        }
        #expect(executions.count == 13)
      }
    }
  }
}

extension DatabaseTests.DurableRecoveryTests {
  /// How long a durable job's recovery takes with a 5 s lease: from the `kill -9` of the process
  /// running it to its attempt 2 running in the other worker process, over
  /// `JOBKIT_RECOVERY_KILLS` kills (not run without it: ~8 s per kill). Prints p50 and p99.
  @Test(.enabled(if: ProcessInfo.processInfo.environment["JOBKIT_RECOVERY_KILLS"] != nil))
  func recoveryTimeOverKills() async throws {
    let kills = Int(ProcessInfo.processInfo.environment["JOBKIT_RECOVERY_KILLS"] ?? "") ?? 20
    let times = try await TestDatabase.withClient { client -> [Duration] in
      var times: [Duration] = []
      for round in 0..<kills {
        let queue = try await TestDatabase.makeQueue(client)
        let leafQueue = try await TestDatabase.makeQueue(client)
        let leavesRun = Self.runLeaves(of: leafQueue, client: client)
        defer { leavesRun.cancel() }
        let extra = ["--kinds", "tree", "--leaf-queue", leafQueue.name, "--lease", "5", "--heartbeat", "1"]
        let workers = try await WorkerProcesses.start(2, queue: queue.name, prefix: "r\(round)-", extra: extra)
        defer { workers.stopAll() }
        let input = TreeKind.Input(depth: 1, width: 2, label: "k", leafSleepMilliseconds: 30_000)
        let root = Task { try await RemoteWork<TreeKind>(input, queue: queue, idempotencyKey: "k").run() }
        defer { root.cancel() }
        try await TestDatabase.eventually("the job runs and waits for its sleeping leaf") {
          let owner = try await Self.owner(client, queue: queue.name)
          let leaves = try await TestDatabase.rows(client, queue: leafQueue.name).values
          return owner != nil && leaves.contains { $0.state == "running" }
        }
        let owner = try await Self.owner(client, queue: queue.name) ?? ""
        let victim = owner.hasPrefix("r\(round)-0/") ? 0 : 1
        let clock = ContinuousClock()
        let killed = clock.now
        workers.processes[victim].signal(SIGKILL)
        try await TestDatabase.eventually("attempt 2 runs", timeout: .seconds(30)) {
          try await TestDatabase.rows(client, queue: queue.name)["k"].map { $0.state == "running" && $0.attempt == 2 }
            ?? false
        }
        times.append(clock.now - killed)
      }
      return times
    }
    let sorted = times.sorted()
    let p50 = sorted[sorted.count / 2]
    let p99 = sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    print("durable recovery with a 5 s lease over \(kills) kills: p50 \(p50), p99 \(p99), max \(sorted.last!)")
    #expect(p99 <= .seconds(10))
  }

  /// Runs the echo leaves of `leafQueue` in this process (a worker that does not run the queue's
  /// routing) until the returned task is cancelled.
  static func runLeaves(of leafQueue: RemoteQueue, client: PostgresClient) -> Task<Void, any Error> {
    let leaves = RemoteWorker(
      queue: leafQueue, id: "leaves", configuration: TestDatabase.workerConfiguration(), logger: TestDatabase.logger
    )
    TestSupport.registerEcho(on: leaves, client: client)
    return Task { try await leaves.run() }
  }

  static func owner(_ client: PostgresClient, queue: String) async throws -> String? {
    let rows = try await client.query(
      "SELECT owner FROM jobkit_remote_tasks WHERE queue = \(queue) AND idempotency_key = 'k' AND state = 'running'")
    for try await owner in rows.decode(String?.self) { return owner }
    return nil
  }
}

extension DatabaseTests.DurableRecoveryTests {
  /// One worker process whose one slot serves every kind recovers a tree whose process was
  /// killed: the rescued rows (the parents included) run there, one after the other.
  @Test(.timeLimit(.minutes(3))) func oneWorkerOfOneSlotRecoversAKilledTree() async throws {
    try await TestDatabase.withClient { client in
      let queue = try await TestDatabase.makeQueue(client)
      let extra = ["--kinds", "echo,tree", "--max-concurrent", "1"]
      let first = try await WorkerProcesses.start(1, queue: queue.name, prefix: "first", extra: extra)
      defer { first.stopAll() }
      let input = TreeKind.Input(depth: 2, width: 2, label: "o", leafSleepMilliseconds: 4_000)
      let handle = try await queue.enqueue(TreeKind.self, input, idempotencyKey: "o")
      let root = Task { try await handle.result() }
      defer { root.cancel() }
      // The root and its two jobs wait; a leaf sleeps.
      try await TestDatabase.eventually("the root, two jobs and a leaf run") {
        try await TestDatabase.rows(client, queue: queue.name).values.filter { $0.state == "running" }.count >= 4
      }
      first.processes[0].signal(SIGKILL)
      let second = try await WorkerProcesses.start(1, queue: queue.name, prefix: "second", extra: extra)
      defer { second.stopAll() }
      // Two leaves sleep 4 s each, one after the other in the one slot.
      let output = try await CrashRun.value(of: root, within: .seconds(60))
      #expect(output == TestSupport.expectedLeaves(input))
    }
  }
}

extension DatabaseTests.DurableRecoveryTests {
  /// A durable job's time limit counts from its first start: the job of attempt 2 gets what is
  /// left. Its 4 s limit ends before its leaf's 6 s sleep (the leaf runs in this process and
  /// survives the kill), so every attempt fails; with a limit counted from each attempt's start,
  /// attempt 2 (2 s after the kill) would outlast the leaf and complete.
  @Test(.timeLimit(.minutes(3))) func aTimeLimitCountsFromTheFirstStartAcrossAKill() async throws {
    try await TestDatabase.withClient { client in
      let queue = try await TestDatabase.makeQueue(client, maxAttempts: 3)
      let leafQueue = try await TestDatabase.makeQueue(client)
      let leavesRun = Self.runLeaves(of: leafQueue, client: client)
      defer { leavesRun.cancel() }
      let extra = ["--kinds", "limited", "--leaf-queue", leafQueue.name]
      let first = try await WorkerProcesses.start(1, queue: queue.name, prefix: "first", extra: extra)
      defer { first.stopAll() }
      let handle = try await queue.enqueue(
        LimitedKind.self, LimitedKind.Input(limitMilliseconds: 4_000, leafSleepMilliseconds: 6_000),
        idempotencyKey: "l")
      try await TestDatabase.eventually("the job waits for its sleeping leaf") {
        try await TestDatabase.rows(client, queue: leafQueue.name).values.contains { $0.state == "running" }
      }
      first.processes[0].signal(SIGKILL)
      let second = try await WorkerProcesses.start(1, queue: queue.name, prefix: "second", extra: extra)
      defer { second.stopAll() }
      let outcome = try await withThrowingTaskGroup(of: Result<String, any Error>?.self) { group in
        group.addTask {
          do { return .success(try await handle.result()) } catch { return .failure(error) }
        }
        group.addTask {
          try await Task.sleep(for: .seconds(60))
          return nil
        }
        let outcome = try await group.next() ?? nil
        group.cancelAll()
        return outcome
      }
      switch outcome {
      case .failure(let error as RemoteTaskError):
        #expect(error.message.contains("time limit"), "\(error)")
        #expect(error.attempt >= 2)
      case let other:
        Issue.record("expected the time limit's failure, got \(String(describing: other))")
      }
      // The leaf ran once: the re-run attached to it.
      #expect(try await TestSupport.executions(client, queue: leafQueue.name) == ["l\u{1F}leaf": 1])
    }
  }
}
