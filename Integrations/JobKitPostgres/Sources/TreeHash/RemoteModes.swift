import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import ServiceLifecycle

/// Logs go to standard error (standard output carries the hashes), notices and worse only.
let bootstrapLogging: Void = LoggingSystem.bootstrap { label in
  var handler = StreamLogHandler.standardError(label: label)
  handler.logLevel = .notice
  return handler
}

/// The client's own log, errors only: it warns about queries issued before its `run()` task got
/// going, which the client holds until it does.
func clientLogger() -> Logger {
  var logger = Logger(label: "tree-hash.postgres")
  logger.logLevel = .error
  return logger
}

/// `tree-hash --database URL DIR`: hashes the tree with its files as ``FileHash`` remote tasks,
/// the client running beside the job, and returns the finished job.
func hashRemotely(
  root: String, options: Options, progress: (@Sendable (Int) -> Void)?
) async throws -> TreeHashJob {
  try await withRemoteQueue(options) { queue in
    let leaves = RemoteLeafHashing(
      queue: queue, runID: options.runID ?? UUID().uuidString, maxQueued: options.concurrency ?? 256)
    let job = TreeHashJob(root: root, leaves: leaves, onFileHashed: progress)
    try await job.run()
    return job
  }
}

/// `tree-hash worker --database URL`: a ``RemoteWorker`` with the ``FileHash`` kind and the
/// durable mode's ``TreeHashTree`` kind, run with its
/// client in a service group until SIGTERM or SIGINT (graceful shutdown: running hashes finish,
/// the rest goes back to the queue). Returns the exit status.
///
/// The worker migrates the queue's schema first, so that workers may start before any job.
func runWorker(_ options: Options) async -> Int32 {
  bootstrapLogging
  let logger = Logger(label: "tree-hash.worker")
  do {
    let client = PostgresClient(
      configuration: try .init(url: options.databaseURL ?? ""), backgroundLogger: clientLogger())
    let queue = RemoteQueue(client: client, name: options.queueName, configuration: .init(), logger: logger)
    let concurrency = options.concurrency ?? max(1, ProcessInfo.processInfo.activeProcessorCount)
    var configuration = RemoteWorker.Configuration()
    // Claims no more rows than it hashes at once (the others stay for the other workers), plus
    // one slot for a tree's job, so that a job waiting for its leaves never holds a slot they
    // need on this worker.
    configuration.maxConcurrent = concurrency + 1
    if let seconds = options.leaseSeconds {
      configuration.leaseDuration = .seconds(seconds)
      configuration.heartbeatInterval = .milliseconds(seconds * 1000 / 3)
    }
    let worker = RemoteWorker(
      queue: queue, id: options.workerID ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())",
      configuration: configuration, logger: logger)
    worker.register(FileHash.self, maxConcurrent: concurrency) { input, _ in
      try FileHash.hash(input)
    }
    worker.register(TreeHashTree.self, maxConcurrent: 1) { input, _ in
      try await TreeHashTree.run(input, queue: queue)
    }
    let group = ServiceGroup(
      configuration: .init(
        services: [
          .init(service: client),
          // Hands finished rows to the tree's waiting leaves (one LISTEN connection).
          .init(service: queue),
          .init(
            service: MigratedWorker(url: options.databaseURL ?? "", queue: queue, worker: worker, logger: logger),
            successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup),
        ],
        gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
    return 0
  } catch {
    FileHandle.standardError.write(Data("tree-hash worker: \(error)\n".utf8))
    return 1
  }
}

/// A worker that checks its connection settings and migrates its queue's schema before it
/// claims (idempotent, safe beside other processes doing the same). Wrong settings end it at
/// once with the reason; an unreachable server is tried for the queue's reconnect timeout; a
/// graceful shutdown (SIGTERM) ends the wait.
struct MigratedWorker: Service {
  let url: String
  let queue: RemoteQueue
  let worker: RemoteWorker
  let logger: Logger

  func run() async throws {
    do {
      try await cancelWhenGracefulShutdown {
        try await PostgresClient.Configuration.checkConnection(
          url: url, timeout: queue.configuration.reconnectTimeout, logger: logger)
        try await queue.migrate()
      }
    } catch is CancellationError where Task.isShuttingDownGracefully {
      return
    }
    guard !Task.isShuttingDownGracefully else { return }
    try await worker.run()
  }
}
