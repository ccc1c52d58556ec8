import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import Testing

@testable import JobKitConsole

/// Pausing and resuming a queue from the console, against a real database.
@Suite(.enabled(if: ConsoleTestDatabase.isAvailable, ConsoleTestDatabase.skipMessage), .timeLimit(.minutes(2)))
struct ConsoleQueueActionTests {
  @Test func aQueueIsPausedAndResumedFromTheDashboardWithTheToken() async throws {
    try await ConsoleTestDatabase.withQueueAndWorker { client, queue in
      _ = try await RemoteWork<ConsoleTestKind>("first", queue: queue, idempotencyKey: "first").run()
      let app = ConsoleTestDatabase.application(client, token: "t")
      let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
      func post(_ path: String, _ body: String) async throws -> HTTPResponse.Status {
        try await app.test(.router) { http in
          try await http.execute(uri: path, method: .post, headers: form, body: ByteBuffer(string: body)).status
        }
      }
      let name = ConsolePaths.percentEncoded(queue.name)

      #expect(try await post("/jobs/queues/pause", "queue=\(name)&token=wrong") == .forbidden)
      #expect(try await !queue.isPaused())
      #expect(try await post("/jobs/queues/pause", "queue=\(name)&token=t") == .seeOther)
      #expect(try await queue.isPaused())

      try await app.test(.router) { http in
        let html = String(buffer: try await http.execute(uri: "/jobs?done=paused", method: .get).body)
        #expect(
          html.contains("data-queue=\"\(queue.name)\" data-kind=\"\(ConsoleTestKind.name)\" data-paused=\"true\""))
        #expect(html.contains("value=\"resume\""))
        #expect(html.contains("Paused: its workers claim no task"))
      }

      // A task added while paused waits; the resume lets the worker run it.
      try await withThrowingTaskGroup(of: String.self) { group in
        group.addTask {
          try await RemoteWork<ConsoleTestKind>("second", queue: queue, idempotencyKey: "second").run()
        }
        while try await RemoteQueue.tasks(
          client: client, filter: .init(queue: queue.name, state: "available"), after: nil, limit: 1,
          logger: ConsoleTestDatabase.logger
        ).isEmpty {
          try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await post("/jobs/queues/resume", "queue=\(name)") == .forbidden)
        #expect(try await queue.isPaused())
        #expect(try await post("/jobs/queues/resume", "queue=\(name)&token=t") == .seeOther)
        #expect(try await !queue.isPaused())
        #expect(try await group.next() == "second")
      }

      try await app.test(.router) { http in
        let html = String(buffer: try await http.execute(uri: "/jobs", method: .get).body)
        #expect(
          html.contains("data-queue=\"\(queue.name)\" data-kind=\"\(ConsoleTestKind.name)\" data-paused=\"false\""))
        #expect(html.contains("value=\"pause\""))
      }
    }
  }

  @Test func aReadOnlyConsoleShowsThePauseButtonDisabledAndRefusesIt() async throws {
    try await ConsoleTestDatabase.withClient { client in
      let queue = try await ConsoleTestDatabase.makeQueue(client)
      try await queue.pause()
      let app = ConsoleTestDatabase.application(client, token: nil)
      try await app.test(.router) { http in
        let html = String(buffer: try await http.execute(uri: "/jobs", method: .get).body)
        #expect(html.contains("data-queue=\"\(queue.name)\""))
        #expect(html.contains("value=\"resume\" disabled"))
        let refused = try await http.execute(
          uri: "/jobs/queues/resume", method: .post,
          headers: [.contentType: "application/x-www-form-urlencoded", ConsoleTestDatabase.tokenHeader: "x"],
          body: ByteBuffer(string: "queue=\(queue.name)"))
        #expect(refused.status == .forbidden)
      }
      #expect(try await queue.isPaused())
      try await queue.resume()
    }
  }
}
