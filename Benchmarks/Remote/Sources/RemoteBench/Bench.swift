import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO

/// What the benchmark measures, from the environment: `N` tasks per run (default 10,000),
/// `WORKERS` worker process counts (default "1 2 4"), `SAMPLES` latency samples (default 200),
/// `ROUNDS` drain rounds (default 1: each round drains with the library and the floor for each
/// worker count, alternating which goes first), `DRAIN_ONLY=1` (no end-to-end or latency run),
/// `DURABILITY` the server's settings to measure with, in turn each round (default "on off": `on`
/// is `fsync`, `synchronous_commit` and `full_page_writes` on, the durability a user runs; `off`
/// all three off, as the test server starts), `BREAKDOWN=1` (each run's statements on standard
/// error: calls per task and rows per call), `KIND_LIMIT=N` (the library's drains run under a
/// limit across workers of N running tasks of the kind: what checking a limit costs).
struct Settings: Sendable {
  var tasks = 10_000
  var workerCounts = [1, 2, 4]
  var samples = 200
  var rounds = 1
  var drainOnly = false
  var durabilities = [true, false]
  var breakdown = false
  /// The limit across workers of the no-op kind in the library's drains, if any.
  var kindLimit: Int?
  /// The claim's batch size, the library's default; the floor uses the same.
  var batch = RemoteWorker.Configuration().batchSize

  init(environment: [String: String]) {
    if let value = environment["N"].flatMap(Int.init), value > 0 { tasks = value }
    if let value = environment["SAMPLES"].flatMap(Int.init), value > 0 { samples = value }
    if let value = environment["ROUNDS"].flatMap(Int.init), value > 0 { rounds = value }
    drainOnly = environment["DRAIN_ONLY"] == "1"
    breakdown = environment["BREAKDOWN"] == "1"
    kindLimit = environment["KIND_LIMIT"].flatMap(Int.init)
    if let list = environment["DURABILITY"] {
      let modes = list.split(whereSeparator: { $0 == " " || $0 == "," }).compactMap { word -> Bool? in
        word == "on" ? true : word == "off" ? false : nil
      }
      if !modes.isEmpty { durabilities = modes }
    }
    if let list = environment["WORKERS"] {
      let counts = list.split(whereSeparator: { $0 == " " || $0 == "," }).compactMap { Int($0) }.filter { $0 > 0 }
      if !counts.isEmpty { workerCounts = counts }
    }
  }
}

/// One run's figures.
struct RunFigures: Sendable {
  var tasksPerSecond: Double
  /// Statements the database executed per task (see ``StatementCounter``).
  var statementsPerTask: Double
  /// CPU seconds per 1,000 tasks, by side (the job's is 0 in a drain: there is no job).
  var cpuPerThousand: CPUSeconds
  /// Seconds per 1,000 tasks that the sides' threads were runnable but waited for a core.
  var waitPerThousand: CPUSeconds
  /// The machine's busy cores over the run, on average (every process, the neighbours' too).
  var busyCores: Double
}

/// The seconds the sides waited for a core, and the machine's busy and total CPU ticks, so far.
typealias WaitReading = (waits: CPUSeconds, busy: Double, all: Double)

/// A run that did not do what it should (a task missing or wrong, a worker's bad exit).
struct BenchFailure: Error, CustomStringConvertible {
  var description: String
}

/// The measurements, each against the server at `JOBKIT_POSTGRES_URL`, each on a queue of its
/// own (a fresh name per run, so nothing is left from an earlier one).
struct Bench: Sendable {
  let client: PostgresClient
  let logger: Logger
  let settings: Settings
  let counter: StatementCounter
  /// The server's main process (its CPU time and its children's are the server's), if found.
  let postmaster: Int32?
  private let runID = String(UUID().uuidString.prefix(8)).lowercased()

  init(client: PostgresClient, logger: Logger, settings: Settings, counter: StatementCounter) async throws {
    self.client = client
    self.logger = logger
    self.settings = settings
    self.counter = counter
    var backend: Int32?
    for try await (pid) in try await client.query("SELECT pg_backend_pid() /* remote-bench */", logger: logger)
      .decode(Int32.self)
    {
      backend = pid
    }
    self.postmaster = backend.flatMap(CPUMeter.parent(of:))
  }

  /// Sets the server's durability (`fsync`, `synchronous_commit`, `full_page_writes`) with
  /// `ALTER SYSTEM` and a reload, and waits until this client's sessions see it.
  func setDurability(_ on: Bool) async throws {
    let value = on ? "on" : "off"
    for setting in ["fsync", "synchronous_commit", "full_page_writes"] {
      try await client.query(
        PostgresQuery(unsafeSQL: "ALTER SYSTEM SET \(setting) = \(value) /* remote-bench */"), logger: logger)
    }
    try await client.query("SELECT pg_reload_conf() /* remote-bench */", logger: logger)
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(10)
    while clock.now < deadline {
      var seen: [String] = []
      for try await (setting) in try await client.query(
        "SELECT setting /* remote-bench */ FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')",
        logger: logger
      ).decode(String.self) {
        seen.append(setting)
      }
      if seen == [value, value] { return }
      try await Task.sleep(for: .milliseconds(20))
    }
    throw BenchFailure(description: "the server did not take durability \(value) within 10 s")
  }

  /// The CPU seconds so far of `workers`, this process (with `job`) and the server.
  private func cpu(_ workers: [Child], job: Bool) -> CPUSeconds {
    CPUSeconds(
      workers: workers.reduce(0) { $0 + CPUMeter.seconds(of: $1.pid) },
      job: job ? CPUMeter.ownSeconds() : 0,
      server: postmaster.map(CPUMeter.serverSeconds(postmaster:)) ?? 0)
  }

  /// The seconds so far that the threads of `workers`, this process (with `job`) and the server
  /// waited for a core, and the machine's busy and total CPU ticks.
  private func waits(_ workers: [Child], job: Bool) -> WaitReading {
    let (busy, all) = CPUMeter.machineTicks()
    let waits = CPUSeconds(
      workers: workers.reduce(0) { $0 + CPUMeter.waitSeconds(of: $1.pid) },
      job: job ? CPUMeter.waitSeconds(of: getpid()) : 0,
      server: postmaster.map(CPUMeter.serverWaitSeconds(postmaster:)) ?? 0)
    return (waits, busy, all)
  }

  /// The figures of a run of `settings.tasks` tasks.
  private func figures(
    seconds: Double, statements: Int, cpu: CPUSeconds,
    waits: (before: WaitReading, after: WaitReading),
    label: String,
    breakdown: (before: [String: StatementFigures], after: [String: StatementFigures])?
  ) -> RunFigures {
    let tasks = Double(settings.tasks)
    if let breakdown {
      FileHandle.standardError.write(
        Data(
          ("remote-bench: \(label): statements\n"
            + StatementCounter.describe(from: breakdown.before, to: breakdown.after, tasks: settings.tasks) + "\n")
            .utf8))
    }
    let wait = waits.after.waits - waits.before.waits
    let all = waits.after.all - waits.before.all
    return RunFigures(
      tasksPerSecond: tasks / seconds, statementsPerTask: Double(statements) / tasks,
      cpuPerThousand: CPUSeconds(
        workers: cpu.workers * 1000 / tasks, job: cpu.job * 1000 / tasks, server: cpu.server * 1000 / tasks),
      waitPerThousand: CPUSeconds(
        workers: wait.workers * 1000 / tasks, job: wait.job * 1000 / tasks, server: wait.server * 1000 / tasks),
      busyCores: all > 0
        ? (waits.after.busy - waits.before.busy) / all * Double(ProcessInfo.processInfo.activeProcessorCount) : 0)
  }

  private func breakdownIfAsked() async throws -> [String: StatementFigures]? {
    settings.breakdown ? try await counter.breakdown() : nil
  }

  /// Rows inserted at once, then drained by `workers` processes: `RemoteWorker`s (`library`) or
  /// the hand-written floor loop. The time is the database's: from the insert to the last
  /// completion.
  func drain(library: Bool, workers: Int, tag: String = "1") async throws -> RunFigures {
    try await freshTable()
    let queue = "bench-\(runID)-\(library ? "lib" : "floor")-\(workers)-\(tag)"
    let children = try (1...workers).map { index in
      try Child(
        library
          ? ["worker", "--queue", queue, "--id", "lib-\(index)"]
          : ["floor-worker", "--queue", queue, "--batch", "\(settings.batch)"])
    }
    if library {
      try await waitForBackends(count: workers, matching: "listen%", containing: md5(queue))
    } else {
      try await waitForBackends(count: workers, matching: "%floor ready%", containing: queue)
    }
    if library, let limit = settings.kindLimit {
      try await RemoteQueue(client: client, name: queue, configuration: .init(), logger: logger)
        .setLimits(.init(maxRunning: limit), forKind: NoOp.name)
    }
    let before = try await counter.read()
    let breakdownBefore = try await breakdownIfAsked()
    let cpuBefore = cpu(children, job: false)
    let waitsBefore = waits(children, job: false)
    try await client.query(
      """
      INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts) /* remote-bench */
      SELECT \(queue), \(NoOp.name), 'k' || g, convert_to(g::text, 'UTF8'), 5
      FROM generate_series(1, \(Int64(settings.tasks))) AS g
      """, logger: logger)
    if !library {
      for child in children { child.send("go") }
    }
    try await waitUntilCompleted(queue: queue)
    let cpuSpent = cpu(children, job: false) - cpuBefore
    let waitsAfter = waits(children, job: false)
    let seconds = try await drainSeconds(queue: queue)
    for child in children {
      // A RemoteWorker runs until told to stop; the floor loop ends at a line once the queue is empty.
      let status: Int32
      if library {
        status = await child.stop()
      } else {
        child.send("stop")
        status = await child.exited()
      }
      guard status == 0 else { throw BenchFailure(description: "a worker of \(queue) exited with status \(status)") }
    }
    let statements = try await counter.read() - before
    let breakdownAfter = try await breakdownIfAsked()
    return figures(
      seconds: seconds, statements: statements, cpu: cpuSpent, waits: (waitsBefore, waitsAfter), label: queue,
      breakdown: breakdownBefore.flatMap { before in breakdownAfter.map { (before, $0) } })
  }

  /// A job tracks every task as a `RemoteWork` at once; `workers` worker processes run them. The
  /// time is the job's `run()`, from its start to its last routed result.
  func endToEnd(workers: Int, tag: String = "1") async throws -> RunFigures {
    try await freshTable()
    let queue = RemoteQueue(
      client: client, name: "bench-\(runID)-job-\(workers)-\(tag)", configuration: .init(), logger: logger)
    let children = try (1...workers).map { try Child(["worker", "--queue", queue.name, "--id", "job-\($0)"]) }
    try await waitForBackends(count: workers, matching: "listen%", containing: md5(queue.name))
    let before = try await counter.read()
    let breakdownBefore = try await breakdownIfAsked()
    let job = ManyRemoteTasks(count: settings.tasks, queue: queue, keyPrefix: "k")
    let cpuBefore = cpu(children, job: true)
    let waitsBefore = waits(children, job: true)
    let clock = ContinuousClock()
    let start = clock.now
    try await whileRouting(queue) { try await job.run() }
    let elapsed = clock.now - start
    let cpuSpent = cpu(children, job: true) - cpuBefore
    let waitsAfter = waits(children, job: true)
    for child in children {
      let status = await child.stop()
      guard status == 0 else {
        throw BenchFailure(description: "a worker of \(queue.name) exited with status \(status)")
      }
    }
    guard job.correct == settings.tasks else {
      throw BenchFailure(description: "\(queue.name): \(job.correct) of \(settings.tasks) results came back right")
    }
    let statements = try await counter.read() - before
    let breakdownAfter = try await breakdownIfAsked()
    return figures(
      seconds: elapsed.seconds, statements: statements, cpu: cpuSpent, waits: (waitsBefore, waitsAfter),
      label: queue.name,
      breakdown: breakdownBefore.flatMap { before in breakdownAfter.map { (before, $0) } })
  }

  /// One worker on an idle queue; one task at a time, each tracked after the previous one's
  /// completion; the time from `trackAndQueue` to the completion. The first five are left out
  /// (connections opening).
  func latencies(tag: String = "1") async throws -> [Duration] {
    try await freshTable()
    let warmUp = 5
    let queue = RemoteQueue(
      client: client, name: "bench-\(runID)-latency-\(tag)", configuration: .init(), logger: logger)
    let worker = try Child(["worker", "--queue", queue.name, "--id", "latency"])
    try await waitForBackends(count: 1, matching: "listen%", containing: md5(queue.name))
    let job = SequentialRemoteTasks(count: warmUp + settings.samples, queue: queue, keyPrefix: "k")
    try await whileRouting(queue) { try await job.run() }
    let status = await worker.stop()
    guard status == 0 else { throw BenchFailure(description: "the latency worker exited with status \(status)") }
    guard job.wrong == 0, job.latencies.count == warmUp + settings.samples else {
      throw BenchFailure(description: "latency: \(job.wrong) wrong results")
    }
    return Array(job.latencies.dropFirst(warmUp))
  }

  // MARK: - Helpers

  /// Runs `body` while `queue` routes results to the waiting tasks (its `run()`, as a job's
  /// process runs it in its service group).
  private func whileRouting(_ queue: RemoteQueue, _ body: @Sendable () async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await queue.run() }
      do {
        try await body()
      } catch {
        group.cancelAll()
        throw error
      }
      group.cancelAll()
    }
  }

  /// Empties the table (the earlier runs' rows) and forces a checkpoint, so that no run pays for
  /// an earlier one's autovacuum or checkpoint (their CPU time would count as the server's).
  private func freshTable() async throws {
    try await client.query("TRUNCATE jobkit_remote_tasks /* remote-bench */", logger: logger)
    try await client.query("CHECKPOINT /* remote-bench */", logger: logger)
  }

  private func md5(_ text: String) async throws -> String {
    for try await (hash) in try await client.query("SELECT md5(\(text)) /* remote-bench */", logger: logger).decode(
      String.self)
    {
      return hash
    }
    throw BenchFailure(description: "md5 returned nothing")
  }

  /// Waits (60 s at most) until `count` backends' last query is like `pattern` and contains
  /// `text`: the workers' `LISTEN` on the queue's channel, or the floor's ready mark.
  private func waitForBackends(count: Int, matching pattern: String, containing text: String) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(60)
    while clock.now < deadline {
      let rows = try await client.query(
        """
        SELECT count(*)::bigint /* remote-bench */ FROM pg_stat_activity
        WHERE query ILIKE \(pattern) AND position(\(text) IN query) > 0 AND query NOT LIKE '%remote-bench */ FROM%'
        """, logger: logger)
      for try await (found) in rows.decode(Int64.self) where found >= count {
        return
      }
      try await Task.sleep(for: .milliseconds(20))
    }
    throw BenchFailure(description: "the workers did not get ready within 60 s")
  }

  /// Waits (10 minutes at most) until every row of `queue` is completed; a failed or cancelled
  /// row is a failure.
  private func waitUntilCompleted(queue: String) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + .seconds(600)
    while clock.now < deadline {
      let rows = try await client.query(
        """
        SELECT count(*) FILTER (WHERE state = 'completed')::bigint,
          count(*) FILTER (WHERE state IN ('failed', 'cancelled'))::bigint /* remote-bench */
        FROM jobkit_remote_tasks WHERE queue = \(queue)
        """, logger: logger)
      for try await (completed, ended) in rows.decode((Int64, Int64).self) {
        guard ended == 0 else { throw BenchFailure(description: "\(queue): \(ended) tasks failed or were cancelled") }
        if completed == settings.tasks { return }
      }
      try await Task.sleep(for: .milliseconds(50))
    }
    throw BenchFailure(description: "\(queue): not completed within 10 minutes")
  }

  /// The database's time from the rows' insert to the last completion.
  private func drainSeconds(queue: String) async throws -> Double {
    let rows = try await client.query(
      """
      SELECT extract(epoch FROM max(finished_at) - min(created_at))::float8 /* remote-bench */
      FROM jobkit_remote_tasks WHERE queue = \(queue)
      """, logger: logger)
    for try await (seconds) in rows.decode(Double.self) {
      return seconds
    }
    throw BenchFailure(description: "\(queue): no rows")
  }
}

extension Duration {
  /// The duration in seconds.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
