import Foundation
import JobKit
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

@testable import JobKitPostgres

/// Errors users match on: one code per case, equality on the code; input checked before any
/// statement (no server needed).
@Suite struct ErrorCodeTests {
  /// A queue on a client that never runs: nothing here may reach the database.
  static func offlineQueue(name: String = "offline") throws -> RemoteQueue {
    let client = PostgresClient(configuration: try .init(url: "postgres://nobody@127.0.0.1:1/none"))
    return RemoteQueue(client: client, name: name, configuration: .init(), logger: Logger(label: "test"))
  }

  @Test func errorsAreEqualByCodeWhateverTheirMessage() {
    #expect(RemoteQueueError(.schemaTooNew, message: "a") == RemoteQueueError(.schemaTooNew, message: "b"))
    #expect(RemoteQueueError(.schemaTooNew, message: "a") != RemoteQueueError(.databaseUnreachable, message: "a"))
    #expect(RemoteQueueError(.databaseUnreachable, message: "").isUnreachable)
    #expect(!RemoteQueueError(.schemaTooNew, message: "").isUnreachable)
    #expect(RemoteTaskError(message: "x", attempt: 1).code == .handlerFailed)
    #expect(
      RemoteTaskError(.leaseExpired, message: "x", attempt: 1)
        == RemoteTaskError(.leaseExpired, message: "y", attempt: 3))
    #expect(RemoteTaskError(.leaseExpired, message: "x", attempt: 1) != RemoteTaskError(message: "x", attempt: 1))
    #expect(RemoteTaskError.Code(name: "noHandler") == .noHandler)
    #expect(PostgresURLError(.invalidPort, message: "a") == PostgresURLError(.invalidPort, message: "b"))
  }

  @Test(arguments: [
    ("postgres://user:s3cr3t-pw@[bad", PostgresURLError.Code.notAURL),
    ("mysql://user:s3cr3t-pw@db.example/db", .unsupportedScheme),
    ("postgres://user:s3cr3t-pw@db.example/db?application_name=x", .unsupportedParameter),
    ("postgres://:s3cr3t-pw@db.example/db", .missingUser),
    ("postgres://user:s3cr3t-pw@/db", .missingHost),
    ("postgres://user:s3cr3t-pw@db.example/db?port=99999", .invalidPort),
    ("postgres://user:s3cr3t-pw@db.example/db?sslmode=bogus", .unsupportedSSLMode),
    ("postgres://user:s3cr3t-pw@db.example/db?sslmode=require&host=/tmp", .unsupportedSSLMode),
    (
      "postgres://user:s3cr3t-pw@db.example/db?sslmode=verify-full&sslrootcert=/no/such/file",
      .unreadableRootCertificate
    ),
  ])
  func eachBadURLHasItsCode(url: String, code: PostgresURLError.Code) {
    #expect {
      _ = try PostgresClient.Configuration(url: url)
    } throws: { error in
      guard let error = error as? PostgresURLError else { return false }
      return error.code == code && !"\(error) \(String(reflecting: error))".contains("s3cr3t-pw")
    }
  }

  @Test(arguments: [
    "nul\u{0}byte",
    String(repeating: "k", count: 5_000),
    String(repeating: "é", count: RemoteQueue.maxKeyBytes / 2 + 1),
    "",
  ])
  func aKeyTheTableCannotHoldFailsTheTaskWithInvalidKey(key: String) async throws {
    let queue = try Self.offlineQueue()
    let work = RemoteWork<EchoKind>(EchoKind.Input(text: "x"), queue: queue, idempotencyKey: key)
    let error = await #expect(throws: RemoteQueueError.self) { try await work.run() }
    #expect(error?.code == .invalidKey)
  }

  @Test func aLongestKeyIsAccepted() throws {
    let queue = try Self.offlineQueue()
    try queue.validate(key: String(repeating: "k", count: RemoteQueue.maxKeyBytes))
  }

  @Test func aQueueNameWithANulByteIsAnInvalidKey() async throws {
    let queue = try Self.offlineQueue(name: "a\u{0}b")
    let work = RemoteWork<EchoKind>(EchoKind.Input(text: "x"), queue: queue, idempotencyKey: "k")
    let error = await #expect(throws: RemoteQueueError.self) { try await work.run() }
    #expect(error?.code == .invalidKey)
  }

  static let invalidConfigurations: [(String, @Sendable (inout RemoteWorker.Configuration) -> Void)] = [
    ("batchSize", { $0.batchSize = 0 }),
    ("maxConcurrent", { $0.maxConcurrent = 0 }),
    ("heartbeatInterval", { $0.heartbeatInterval = .zero }),
    ("leaseDuration", { $0.leaseDuration = .zero }),
    ("pollInterval", { $0.pollInterval = .seconds(-1) }),
    ("gracePeriod", { $0.gracePeriod = .seconds(-1) }),
    ("pruneInterval", { $0.pruneInterval = .zero }),
  ]

  @Test(arguments: invalidConfigurations)
  func aWorkerWithASettingOutOfRangeRefusesToRun(
    name: String, change: @Sendable (inout RemoteWorker.Configuration) -> Void
  ) async throws {
    var configuration = RemoteWorker.Configuration()
    change(&configuration)
    let worker = RemoteWorker(
      queue: try Self.offlineQueue(), id: "w", configuration: configuration, logger: Logger(label: "test"))
    let error = await #expect(throws: RemoteQueueError.self) { try await worker.run() }
    #expect(error?.code == .invalidConfiguration)
    #expect(error?.message.contains(name) == true)
  }

  static let invalidRetentions: [(String, @Sendable (inout RemoteQueue.Retention) -> Void)] = [
    ("completed", { $0.completed = .zero }),
    ("failed", { $0.failed = .seconds(-1) }),
    ("cancelled", { $0.cancelled = .zero }),
    ("batchSize", { $0.batchSize = 0 }),
  ]

  @Test(arguments: invalidRetentions)
  func aRetentionOutOfRangeIsRefusedByPruneAndByTheWorker(
    name: String, change: @Sendable (inout RemoteQueue.Retention) -> Void
  ) async throws {
    var configuration = RemoteQueue.Configuration()
    change(&configuration.retention)
    let client = PostgresClient(configuration: try .init(url: "postgres://nobody@127.0.0.1:1/none"))
    let queue = RemoteQueue(
      client: client, name: "offline", configuration: configuration, logger: Logger(label: "test"))
    let pruneError = await #expect(throws: RemoteQueueError.self) { try await queue.prune() }
    #expect(pruneError?.code == .invalidConfiguration)
    #expect(pruneError?.message.contains(name) == true)
    let worker = RemoteWorker(queue: queue, id: "w", configuration: .init(), logger: Logger(label: "test"))
    let runError = await #expect(throws: RemoteQueueError.self) { try await worker.run() }
    #expect(runError?.code == .invalidConfiguration)
  }

  @Test func aWorkerRunsOnce() async throws {
    var configuration = RemoteWorker.Configuration()
    configuration.batchSize = 0
    let worker = RemoteWorker(
      queue: try Self.offlineQueue(), id: "w", configuration: configuration, logger: Logger(label: "test"))
    await #expect(throws: RemoteQueueError.self) { try await worker.run() }
    let error = await #expect(throws: RemoteQueueError.self) { try await worker.run() }
    #expect(error?.code == .workerAlreadyRan)
  }
}
