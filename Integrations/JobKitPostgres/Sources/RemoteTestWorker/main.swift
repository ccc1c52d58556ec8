// The multi-process tests' processes:
//   jobkit-remote-test-worker worker --database URL --queue NAME --id ID [--lease S] [--heartbeat S]
//                                    [--grace S] [--max-concurrent N] [--batch N] [--kinds echo,tree,limited]
//                                    [--leaf-queue NAME] [--max-attempts N] [--history DIR]
//   jobkit-remote-test-worker job --database URL --queue NAME --count N --prefix P [--sleep MS]
// A worker prints "ready" once it reached the database, and its statistics when it stops. A job
// prints "done results=… failures=… duplicates=…" and exits 0 when each result came exactly once.
import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import ServiceLifecycle

/// Writes a line to the standard output at once (the tests read it through a pipe).
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String, status: Int32 = 1) -> Never {
  FileHandle.standardError.write(Data("jobkit-remote-test-worker: \(message)\n".utf8))
  exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first, mode == "worker" || mode == "job" else {
  fail("usage: jobkit-remote-test-worker worker|job --database URL --queue NAME …", status: 2)
}
arguments.removeFirst()
var parsed: [String: String] = [:]
while arguments.count >= 2, arguments[0].hasPrefix("--") {
  parsed[String(arguments[0].dropFirst(2))] = arguments[1]
  arguments.removeFirst(2)
}
let options = parsed
guard arguments.isEmpty else { fail("unexpected argument '\(arguments[0])'", status: 2) }
guard let url = options["database"], let queueName = options["queue"] else {
  fail("--database and --queue are required", status: 2)
}
func seconds(_ name: String, _ fallback: Double) -> Duration {
  .milliseconds(Int((Double(options[name] ?? "") ?? fallback) * 1000))
}

let configuration: PostgresClient.Configuration
do {
  configuration = try PostgresClient.Configuration(url: url)
} catch {
  fail("\(error)", status: 2)
}

LoggingSystem.bootstrap { label in
  var handler = StreamLogHandler.standardError(label: label)
  handler.logLevel = .notice
  return handler
}
let logger = Logger(label: "jobkit-remote-test-worker")
let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
var queueConfiguration = RemoteQueue.Configuration()
queueConfiguration.pollInterval = seconds("poll", 0.5)
if let attempts = options["max-attempts"].flatMap({ Int($0) }) {
  queueConfiguration.retryPolicy = RetryPolicy(maxAttempts: attempts)
}
let queue = RemoteQueue(client: client, name: queueName, configuration: queueConfiguration, logger: logger)

struct ConnectTimeout: Error, CustomStringConvertible {
  let seconds: String
  var description: String { "no connection within \(seconds) s" }
}

// The client runs for the whole process (its run() may be called once), so a worker's
// shutdown can still hand rows back after the service group stopped it.
let clientRun = Task { await client.run() }

/// Reaches the database (the schema and the test table), or exits with one clear error.
func connect() async {
  do {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask {
        try await PostgresClient.Configuration.checkConnection(
          url: url, timeout: seconds("connect-timeout", 15), logger: logger)
        try await queue.migrate()
        try await TestSupport.prepare(client)
      }
      group.addTask {
        try await Task.sleep(for: seconds("connect-timeout", 15))
        throw ConnectTimeout(seconds: options["connect-timeout"] ?? "15")
      }
      try await group.next()
      group.cancelAll()
    }
  } catch {
    fail("cannot use the database: \(String(describing: error)) (\(String(reflecting: error).prefix(300)))")
  }
}

switch mode {
case "worker":
  var workerConfiguration = RemoteWorker.Configuration()
  workerConfiguration.leaseDuration = seconds("lease", 2)
  workerConfiguration.heartbeatInterval = seconds("heartbeat", 0.5)
  workerConfiguration.gracePeriod = seconds("grace", 5)
  workerConfiguration.pollInterval = seconds("poll", 0.5)
  workerConfiguration.retryPolicy = RetryPolicy(
    maxAttempts: 5, initialDelay: .milliseconds(50), maxDelay: .seconds(300))
  workerConfiguration.maxConcurrent = Int(options["max-concurrent"] ?? "") ?? 16
  workerConfiguration.batchSize = Int(options["batch"] ?? "") ?? 16
  let worker = RemoteWorker(
    queue: queue, id: options["id"] ?? "worker-\(getpid())", configuration: workerConfiguration, logger: logger)
  let kinds = Set((options["kinds"] ?? "echo").split(separator: ",").map(String.init))
  // The crash test's history: a file per process in this folder.
  let history: CrashHistoryLog?
  do {
    history = try options["history"].map { try CrashHistoryLog(directory: $0) }
  } catch {
    fail("cannot open the history file: \(error)", status: 2)
  }
  if kinds.contains("echo") { TestSupport.registerEcho(on: worker, client: client, history: history) }
  let leafQueue = options["leaf-queue"].map {
    RemoteQueue(client: client, name: $0, configuration: queueConfiguration, logger: logger)
  }
  if kinds.contains("limited"), let leafQueue {
    TestSupport.registerLimited(on: worker, leafQueue: leafQueue)
  }
  if kinds.contains("tree") {
    TestSupport.registerTree(on: worker, client: client, leafQueue: leafQueue, history: history)
  }
  await connect()
  say("ready")
  let group = ServiceGroup(
    configuration: .init(
      services: [.init(service: worker, successTerminationBehavior: .gracefullyShutdownGroup)],
      gracefulShutdownSignals: [.sigterm, .sigint],
      logger: logger))
  do {
    try await group.run()
  } catch {
    fail("\(error)")
  }
  let statistics = worker.statistics
  say(
    "stopped claimed=\(statistics.claimed) completed=\(statistics.completed) stale=\(statistics.stale)"
      + " handedBack=\(statistics.handedBack)")
default:
  guard let count = Int(options["count"] ?? ""), let prefix = options["prefix"] else {
    fail("job needs --count and --prefix", status: 2)
  }
  await connect()
  let job = TestSupport.EchoJob(
    queue: queue, count: count, prefix: prefix, sleepMilliseconds: Int(options["sleep"] ?? "") ?? 0)
  say("started")
  do {
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await queue.run() }
      try await job.run()
      group.cancelAll()
    }
  } catch {
    fail("the job failed: \(error)")
  }
  clientRun.cancel()
  let duplicates = job.results.values.filter { $0 != 1 }.count
  say("done results=\(job.results.count) failures=\(job.failureMessages.count) duplicates=\(duplicates)")
  exit(job.results.count == count && duplicates == 0 && job.failureMessages.isEmpty ? 0 : 1)
}
