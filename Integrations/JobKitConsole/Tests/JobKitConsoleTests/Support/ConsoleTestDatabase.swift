import Foundation
import HTTPTypes
import Hummingbird
import JobKit
import JobKitConsole
import JobKitPostgres
import Logging
import PostgresNIO
import Testing

/// The kind the console's tests run: returns its input, but fails its first run when the input
/// is `fail-once`, with an error whose text is markup.
enum ConsoleTestKind: RemoteTaskKind {
  typealias Input = String
  typealias Output = String
  static let name = "console-test"
}

/// A kind whose input is a JSON object, for the filter on an input's field.
enum ConsoleOrderKind: RemoteTaskKind {
  struct Input: Codable, Sendable {
    struct Customer: Codable, Sendable {
      var name: String
    }
    var customer: Customer
    var size: Int
  }
  typealias Output = Int
  static let name = "console-order"
}

/// The error a `fail-once` task stores.
struct MarkupError: Error, CustomStringConvertible {
  var description: String { "<script>alert('pwned')</script>" }
}

/// The database the tests use: `JOBKIT_POSTGRES_URL`, set by `with-postgres`. Each test uses a
/// queue of its own.
enum ConsoleTestDatabase {
  static let url = ProcessInfo.processInfo.environment["JOBKIT_POSTGRES_URL"]
  static var isAvailable: Bool { url != nil }
  static let skipMessage: Comment =
    "JOBKIT_POSTGRES_URL is not set: run the tests through Integrations/JobKitPostgres/scripts/with-postgres"
  static let logger = Logger(label: "JobKitConsoleTests")
  static let tokenHeader = HTTPField.Name("X-JobKit-Token")!

  /// Runs `body` with a running client on the test database.
  static func withClient<Result: Sendable>(_ body: @Sendable (PostgresClient) async throws -> Result)
    async throws -> Result
  {
    let client = PostgresClient(configuration: try PostgresClient.Configuration(url: url ?? ""))
    return try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      return try await body(client)
    }
  }

  /// A migrated queue of its own whose tasks run once.
  static func makeQueue(_ client: PostgresClient) async throws -> RemoteQueue {
    var configuration = RemoteQueue.Configuration()
    configuration.retryPolicy = RetryPolicy(maxAttempts: 1)
    configuration.pollInterval = .milliseconds(250)
    let queue = RemoteQueue(
      client: client, name: "console-\(UUID().uuidString.prefix(8).lowercased())", configuration: configuration,
      logger: logger)
    try await queue.migrate()
    return queue
  }

  /// Runs `body` with a queue of its own that a worker serves (the test kind); stops the worker
  /// after.
  static func withQueueAndWorker(_ body: @Sendable (PostgresClient, RemoteQueue) async throws -> Void) async throws {
    try await withClient { client in
      let queue = try await makeQueue(client)
      var configuration = RemoteWorker.Configuration()
      configuration.pollInterval = .milliseconds(250)
      configuration.retryPolicy = RetryPolicy(maxAttempts: 1, initialDelay: .milliseconds(20), maxDelay: .seconds(300))
      let worker = RemoteWorker(queue: queue, id: "console-test-worker", configuration: configuration, logger: logger)
      worker.register(ConsoleTestKind.self) { input, context in
        if input == "fail-once" && context.attempt == 1 { throw MarkupError() }
        return input
      }
      worker.register(ConsoleOrderKind.self) { input, _ in input.size }
      try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await worker.run() }
        group.addTask { try await queue.run() }
        defer { group.cancelAll() }
        try await body(client, queue)
      }
    }
  }

  /// An application with the console's routes under `/jobs`.
  static func application(_ client: PostgresClient, token: String?) -> some ApplicationProtocol {
    let router = Router()
    RemoteConsole(client: client, configuration: .init(token: token), logger: logger)
      .addRoutes(to: router, atPath: "/jobs")
    return Application(router: router, logger: logger)
  }

  /// The channel on which the queue `queue` announces new tasks (as the library's trigger names it).
  static func newTaskChannel(_ client: PostgresClient, queue: String) async throws -> String {
    var hash = ""
    for try await value in try await client.query("SELECT md5(\(queue))", logger: logger).decode(String.self) {
      hash = value
    }
    return "jk_\(hash)_new"
  }

  /// The count the dashboard `html` shows for `queue` and `state` (its first kind), or `nil`.
  static func count(in html: String, queue: String, state: String) -> Int? {
    guard let start = html.range(of: "<tr data-queue=\"\(queue)\"") else { return nil }
    let tail = html[start.lowerBound...]
    let row = tail[..<(tail.range(of: "</tr>")?.lowerBound ?? tail.endIndex)]
    guard let cell = row.range(of: "data-state=\"\(state)\"><a href=\"") else { return nil }
    let rest = row[cell.upperBound...]
    guard let close = rest.range(of: "\">") else { return nil }
    return Int(rest[close.upperBound...].prefix { $0.isNumber })
  }
}
