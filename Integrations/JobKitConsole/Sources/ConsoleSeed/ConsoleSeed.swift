import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO

/// Seeds a database for the console's browser check, through JobKitPostgres's API only:
///
/// - `jobkit-console-seed seed`: in queue `console-demo`, 5 completed `resize-image` tasks and
///   one `send-email` task (key `<b>mail-1</b>`) that failed with the error
///   `<script>alert('pwned')</script>`; in queue `console-backlog`, 3 `report` tasks left
///   available (no worker serves that queue); a durable `fulfil-order` task whose handler runs
///   two `pack-item` children. Prints `failed-task=ID` and `durable-task=ID`.
/// - `jobkit-console-seed complete KEY`: a worker of `console-demo` runs until the task with key
///   KEY is completed (after a retry, its second run succeeds).
///
/// The database comes from `JOBKIT_POSTGRES_URL`.
@main
struct ConsoleSeed {
  enum ResizeImage: RemoteTaskKind {
    typealias Input = String
    typealias Output = String
    static let name = "resize-image"
  }

  enum SendEmail: RemoteTaskKind {
    typealias Input = String
    typealias Output = String
    static let name = "send-email"
  }

  enum Report: RemoteTaskKind {
    typealias Input = String
    typealias Output = String
    static let name = "report"
  }

  enum FulfilOrder: RemoteTaskKind {
    typealias Input = String
    typealias Output = String
    static let name = "fulfil-order"
  }

  enum PackItem: RemoteTaskKind {
    typealias Input = String
    typealias Output = String
    static let name = "pack-item"
  }

  struct MarkupError: Error, CustomStringConvertible {
    var description: String { "<script>alert('pwned')</script>" }
  }

  static let failingKey = "<b>mail-1</b>"

  static func main() async throws {
    let arguments = Array(CommandLine.arguments.dropFirst())
    guard let url = ProcessInfo.processInfo.environment["JOBKIT_POSTGRES_URL"], let command = arguments.first else {
      FileHandle.standardError.write(
        Data("usage: JOBKIT_POSTGRES_URL=... jobkit-console-seed seed|complete KEY\n".utf8))
      exit(2)
    }
    let client = PostgresClient(configuration: try PostgresClient.Configuration(url: url))
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      var configuration = RemoteQueue.Configuration()
      configuration.retryPolicy = RetryPolicy(maxAttempts: 1)
      let demo = RemoteQueue(
        client: client, name: "console-demo", configuration: configuration, logger: Logger(label: "console-seed"))
      try await demo.migrate()
      switch command {
      case "seed":
        try await seed(client, demo)
      case "complete" where arguments.count == 2:
        try await withWorker(demo) {
          let output = try await RemoteWork<SendEmail>("mail", queue: demo, idempotencyKey: arguments[1]).run()
          print("completed: \(output)")
        }
      default:
        FileHandle.standardError.write(Data("unknown command\n".utf8))
        exit(2)
      }
    }
  }

  static func seed(_ client: PostgresClient, _ demo: RemoteQueue) async throws {
    try await withWorker(demo) {
      for index in 1...5 {
        _ = try await RemoteWork<ResizeImage>("image-\(index).png", queue: demo, idempotencyKey: "image-\(index)").run()
      }
      let failing = RemoteWork<SendEmail>("mail", queue: demo, idempotencyKey: failingKey)
      do {
        _ = try await failing.run()
      } catch {
        print("failed-task=\(failing.taskID ?? -1)")
      }
      let order = RemoteWork<FulfilOrder>("order-1", queue: demo, idempotencyKey: "order-1")
      _ = try await order.run()
      print("durable-task=\(order.taskID ?? -1)")
    }
    // Tasks nobody serves: inserted, then left available when the process exits (a cancelled
    // wait would cancel them).
    let backlog = RemoteQueue(
      client: client, name: "console-backlog", configuration: .init(), logger: Logger(label: "console-seed"))
    let works = (1...3).map { RemoteWork<Report>("report \($0)", queue: backlog, idempotencyKey: "report-\($0)") }
    await withTaskGroup(of: Void.self) { group in
      for work in works {
        group.addTask { _ = try? await work.run() }
      }
      while works.contains(where: { $0.taskID == nil }) {
        try? await Task.sleep(for: .milliseconds(20))
      }
      print("backlog=\(works.count)")
      exit(0)
    }
  }

  /// Runs `body` while a worker of `queue` runs the demo kinds.
  static func withWorker(_ queue: RemoteQueue, _ body: @Sendable () async throws -> Void) async throws {
    var configuration = RemoteWorker.Configuration()
    configuration.pollInterval = .milliseconds(250)
    let worker = RemoteWorker(
      queue: queue, id: "console-seed", configuration: configuration, logger: Logger(label: "console-seed"))
    worker.register(ResizeImage.self) { input, _ in "resized \(input)" }
    worker.register(PackItem.self) { input, _ in "packed \(input)" }
    worker.register(FulfilOrder.self) { input, _ in
      for item in 1...2 {
        _ = try await RemoteWork<PackItem>("\(input) item \(item)", queue: queue, idempotencyKey: "item-\(item)").run()
      }
      return "fulfilled \(input)"
    }
    worker.register(SendEmail.self) { input, context in
      if context.attempt == 1 { throw MarkupError() }
      return "sent \(input)"
    }
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { try await worker.run() }
      group.addTask { try await queue.run() }
      defer { group.cancelAll() }
      try await body()
    }
  }
}
