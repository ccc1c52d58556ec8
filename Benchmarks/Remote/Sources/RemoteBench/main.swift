// remote-bench: JobKitPostgres's remote tasks on a real PostgreSQL (JOBKIT_POSTGRES_URL; run.sh
// starts a throwaway server). Prints a markdown table:
//   - drain throughput of N no-op tasks (rows inserted at once) with 1, 2 and 4 worker processes,
//     against a hand-written postgres-nio loop with the same claim, completion and batch size;
//   - end-to-end throughput: a job tracking N `RemoteWork`s at once, with the same workers;
//   - latency from `trackAndQueue` to the completion on an idle queue (p50, p99);
//   - statements (round trips) per task.
// Workers are child processes of this program:
//     remote-bench worker --queue Q --id ID          a RemoteWorker with the no-op kind
//     remote-bench floor-worker --queue Q --batch B  the hand-written loop (FloorWorker.swift)
// Environment: N (tasks per run, default 10000), WORKERS (default "1 2 4"), SAMPLES (latency
// samples, default 200). Exit status 1 if any task did not complete with the right output.

import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import ServiceLifecycle

LoggingSystem.bootstrap { label in
  var handler = StreamLogHandler.standardError(label: label)
  handler.logLevel = .warning
  return handler
}
let logger = Logger(label: "remote-bench")
/// The client's own log, errors only: it warns about queries issued before its `run()` task got
/// going, which it holds until it does.
let clientLogger: Logger = {
  var logger = Logger(label: "remote-bench.postgres")
  logger.logLevel = .error
  return logger
}()

func fatal(_ message: String) -> Never {
  FileHandle.standardError.write(Data("remote-bench: \(message)\n".utf8))
  exit(1)
}

guard let url = ProcessInfo.processInfo.environment["JOBKIT_POSTGRES_URL"] else {
  fatal("JOBKIT_POSTGRES_URL is not set (run Benchmarks/Remote/run.sh)")
}
let configuration: PostgresClient.Configuration
do {
  configuration = try PostgresClient.Configuration(url: url)
} catch {
  fatal("\(error)")
}

/// The value after `name` in the arguments.
func argument(_ name: String) -> String? {
  let arguments = CommandLine.arguments
  guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
  return arguments[index + 1]
}

/// Ends this worker process once the benchmark that started it is gone (one that failed leaves
/// no worker behind, retrying against a server that was stopped): checked every second on a
/// thread of its own.
func exitWithParent() {
  let parent = getppid()
  Thread.detachNewThread {
    while getppid() == parent { Thread.sleep(forTimeInterval: 1) }
    exit(2)
  }
}

let mode = CommandLine.arguments.dropFirst().first ?? ""
let client = PostgresClient(configuration: configuration, backgroundLogger: clientLogger)

switch mode {
case "worker":
  exitWithParent()
  guard let queueName = argument("--queue"), let id = argument("--id") else { fatal("worker needs --queue and --id") }
  let queue = RemoteQueue(client: client, name: queueName, configuration: .init(), logger: logger)
  let worker = RemoteWorker(queue: queue, id: id, configuration: .init(), logger: logger)
  worker.register(NoOp.self) { input, _ in input }
  let group = ServiceGroup(
    configuration: .init(
      services: [.init(service: client), .init(service: worker)], gracefulShutdownSignals: [.sigterm],
      logger: logger))
  do {
    try await group.run()
  } catch {
    fatal("worker: \(error)")
  }

case "floor-worker":
  exitWithParent()
  guard let queue = argument("--queue"), let batch = argument("--batch").flatMap(Int.init) else {
    fatal("floor-worker needs --queue and --batch")
  }
  await withTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    do {
      try await FloorWorker.run(queue: queue, batch: batch, client: client, logger: logger)
    } catch {
      fatal("floor-worker: \(error)")
    }
    group.cancelAll()
  }

case "":
  let settings = Settings(environment: ProcessInfo.processInfo.environment)
  await withTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    do {
      try await RemoteQueue(client: client, name: "bench", configuration: .init(), logger: logger).migrate()
      let counter = await StatementCounter.make(client: client, logger: logger)
      let bench = try await Bench(client: client, logger: logger, settings: settings, counter: counter)
      print(try await Report.measure(bench))
    } catch {
      fatal("\(error)")
    }
    group.cancelAll()
  }

default:
  fatal("unknown mode \(mode) (worker, floor-worker, or none)")
}
