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

/// The console against a real database (`JOBKIT_POSTGRES_URL`, set by
/// `Integrations/JobKitPostgres/scripts/with-postgres`): tasks added and run through
/// JobKitPostgres's API, pages rendered through Hummingbird's router test client.
@Suite(.enabled(if: ConsoleTestDatabase.isAvailable, ConsoleTestDatabase.skipMessage), .timeLimit(.minutes(2)))
struct ConsoleDatabaseTests {
  @Test func theDashboardAndTaskPageShowTheQueueAndARetryNeedsTheToken() async throws {
    try await ConsoleTestDatabase.withQueueAndWorker { client, queue in
      for index in 1...3 {
        _ = try await RemoteWork<ConsoleTestKind>("ok-\(index)", queue: queue, idempotencyKey: "ok-\(index)").run()
      }
      let markup = RemoteWork<ConsoleTestKind>("<img src=x onerror=alert(1)>", queue: queue, idempotencyKey: "<i>k</i>")
      _ = try await markup.run()
      let markupID = try #require(markup.taskID)
      let failing = RemoteWork<ConsoleTestKind>("fail-once", queue: queue, idempotencyKey: "<b>fail</b>")
      await #expect(throws: RemoteTaskError.self) { try await failing.run() }
      let id = try #require(failing.taskID)

      let app = ConsoleTestDatabase.application(client, token: "s3cret")
      try await app.test(.router) { http in
        let dashboard = try await http.execute(uri: "/jobs", method: .get)
        #expect(dashboard.status == .ok)
        let html = String(buffer: dashboard.body)
        #expect(ConsoleTestDatabase.count(in: html, queue: queue.name, state: "completed") == 4)
        #expect(ConsoleTestDatabase.count(in: html, queue: queue.name, state: "failed") == 1)
        #expect(ConsoleTestDatabase.count(in: html, queue: queue.name, state: "available") == 0)

        let page = String(buffer: try await http.execute(uri: "/jobs/tasks/\(id)", method: .get).body)
        #expect(page.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"))
        #expect(!page.contains("<script>alert"))
        #expect(page.contains("&lt;b&gt;fail&lt;/b&gt;"))
        #expect(page.contains("data-state=\"failed\""))

        // Input and output (the same text, JSON-encoded) and the key: text, no element.
        let markupPage = String(buffer: try await http.execute(uri: "/jobs/tasks/\(markupID)", method: .get).body)
        #expect(markupPage.components(separatedBy: "&quot;&lt;img src=x onerror=alert(1)&gt;&quot;").count == 3)
        #expect(markupPage.contains("&lt;i&gt;k&lt;/i&gt;"))
        #expect(!markupPage.contains("<img") && !markupPage.contains("<i>"))
        let all = String(buffer: try await http.execute(uri: "/jobs/tasks?queue=\(queue.name)", method: .get).body)
        #expect(all.contains("&lt;i&gt;k&lt;/i&gt;") && all.contains("&lt;script&gt;alert("))
        #expect(!all.contains("<i>") && !all.contains("<script>alert"))

        let fragment = String(buffer: try await http.execute(uri: "/jobs/tasks/\(id)?fragment=1", method: .get).body)
        #expect(fragment.hasPrefix("<dl class=\"task\">"))
        #expect(fragment.contains("Refreshed at"))

        let list = String(
          buffer: try await http.execute(uri: "/jobs/tasks?queue=\(queue.name)&state=failed", method: .get).body)
        #expect(list.contains("data-id=\"\(id)\""))
        #expect(!list.contains("data-state=\"completed\""))

        // Refused: no token, a wrong one, the right one from another site.
        let refusals: [HTTPFields] = [
          [:], [ConsoleTestDatabase.tokenHeader: "wrong"],
          [ConsoleTestDatabase.tokenHeader: "s3cret", .origin: "http://evil.example"],
        ]
        for headers in refusals {
          let refused = try await http.execute(uri: "/jobs/tasks/\(id)/retry", method: .post, headers: headers)
          #expect(refused.status == .forbidden)
        }
        #expect(
          try await RemoteQueue.task(client: client, id: id, logger: ConsoleTestDatabase.logger)?.state == "failed")

        // The token in the form, from the console's own page.
        let retried = try await http.execute(
          uri: "/jobs/tasks/\(id)/retry", method: .post,
          headers: [
            .origin: "http://localhost", .contentType: "application/x-www-form-urlencoded",
          ],
          body: ByteBuffer(string: "token=s3cret&action=retry"))
        #expect(retried.status == .seeOther)
        #expect(retried.headers[.location] == "/jobs/tasks/\(id)?done=retried")
      }
      // Back to available (or already claimed again): the worker completes it on its second run.
      let output = try await RemoteWork<ConsoleTestKind>("fail-once", queue: queue, idempotencyKey: "<b>fail</b>").run()
      #expect(output == "fail-once")
      let row = try #require(try await RemoteQueue.task(client: client, id: id, logger: ConsoleTestDatabase.logger))
      #expect(row.state == "completed")
      #expect(row.attempt == 2)
      #expect(row.errorMessage == nil)
    }
  }

  @Test func aReadOnlyConsoleRefusesActionsAndShowsThemDisabled() async throws {
    try await ConsoleTestDatabase.withQueueAndWorker { client, queue in
      let failing = RemoteWork<ConsoleTestKind>("fail-once", queue: queue, idempotencyKey: "read-only")
      await #expect(throws: RemoteTaskError.self) { try await failing.run() }
      let id = try #require(failing.taskID)
      let app = ConsoleTestDatabase.application(client, token: nil)
      try await app.test(.router) { http in
        let page = String(buffer: try await http.execute(uri: "/jobs/tasks/\(id)", method: .get).body)
        #expect(page.contains("Read-only"))
        #expect(page.contains("value=\"retry\" disabled"))
        let refused = try await http.execute(
          uri: "/jobs/tasks/\(id)/retry", method: .post, headers: [ConsoleTestDatabase.tokenHeader: "anything"])
        #expect(refused.status == .forbidden)
      }
      #expect(try await RemoteQueue.task(client: client, id: id, logger: ConsoleTestDatabase.logger)?.state == "failed")
    }
  }

  @Test func keysetPagesVisitEveryRowOnceNewestFirst() async throws {
    try await ConsoleTestDatabase.withQueueAndWorker { client, queue in
      var ids: [Int64] = []
      for index in 1...7 {
        let work = RemoteWork<ConsoleTestKind>("row-\(index)", queue: queue, idempotencyKey: "row-\(index)")
        _ = try await work.run()
        ids.append(try #require(work.taskID))
      }
      var seen: [Int64] = []
      var cursor: RemoteQueue.TaskCursor?
      let filter = RemoteQueue.TaskFilter(queue: queue.name, keyPrefix: "row-")
      for _ in 0..<10 {
        let page = try await RemoteQueue.tasks(
          client: client, filter: filter, after: cursor, limit: 3, logger: ConsoleTestDatabase.logger)
        seen += page.map(\.id)
        guard page.count == 3, let last = page.last else { break }
        cursor = last.cursor
      }
      #expect(seen == ids.reversed())
      // Key prefixes are literal: `_` and `%` match themselves only.
      let none = try await RemoteQueue.tasks(
        client: client, filter: .init(queue: queue.name, keyPrefix: "row_"), after: nil, limit: 10,
        logger: ConsoleTestDatabase.logger)
      #expect(none.isEmpty)
    }
  }

  @Test func tasksFilterOnAFieldOfTheirInput() async throws {
    try await ConsoleTestDatabase.withQueueAndWorker { client, queue in
      let orders = [("acme", 1), ("globex", 2), ("acme", 3)]
      for (index, order) in orders.enumerated() {
        let input = ConsoleOrderKind.Input(customer: .init(name: order.0), size: order.1)
        _ = try await RemoteWork<ConsoleOrderKind>(input, queue: queue, idempotencyKey: "order-\(index)").run()
      }
      _ = try await RemoteWork<ConsoleTestKind>("acme", queue: queue, idempotencyKey: "a-string-input").run()
      func keys(_ field: String, _ value: String) async throws -> [String] {
        let filter = RemoteQueue.TaskFilter(queue: queue.name, inputField: field, inputValue: value)
        return try await RemoteQueue.tasks(
          client: client, filter: filter, after: nil, limit: 10, logger: ConsoleTestDatabase.logger
        ).map(\.idempotencyKey)
      }
      #expect(try await keys("customer.name", "acme") == ["order-2", "order-0"])
      #expect(try await keys("size", "2") == ["order-1"])
      #expect(try await keys("customer", "acme").isEmpty)
      let app = ConsoleTestDatabase.application(client, token: nil)
      try await app.test(.router) { http in
        let list = String(
          buffer: try await http.execute(
            uri: "/jobs/tasks?queue=\(queue.name)&field=customer.name&value=globex", method: .get
          ).body)
        #expect(list.contains(">order-1<"))
        #expect(!list.contains(">order-0<"))
        #expect(list.contains("value=\"customer.name\""))
      }
    }
  }

  @Test func cancellingAnAvailableTaskGoesThroughTheQueuesCancel() async throws {
    try await ConsoleTestDatabase.withClient { client in
      let queue = try await ConsoleTestDatabase.makeQueue(client)
      let channel = try await ConsoleTestDatabase.newTaskChannel(client, queue: queue.name)
      let work = RemoteWork<ConsoleTestKind>("waits", queue: queue, idempotencyKey: "waits")
      // No worker serves this queue: the task stays available until cancelled. The queue's
      // "new" notification says when its row is in.
      try await client.withConnection { connection in
        try await connection.listen(on: channel) { notifications in
          try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
              await #expect(throws: CancellationError.self) { try await work.run() }
            }
            for try await _ in notifications { break }
            let rows = try await RemoteQueue.tasks(
              client: client, filter: .init(queue: queue.name), after: nil, limit: 5,
              logger: ConsoleTestDatabase.logger)
            let id = try #require(rows.first?.id)
            #expect(rows.first?.state == "available")
            let app = ConsoleTestDatabase.application(client, token: "t")
            try await app.test(.router) { http in
              let cancelled = try await http.execute(
                uri: "/jobs/tasks/\(id)/cancel", method: .post, headers: [ConsoleTestDatabase.tokenHeader: "t"])
              #expect(cancelled.status == .seeOther)
            }
            try await group.waitForAll()
            let row = try await RemoteQueue.task(client: client, id: id, logger: ConsoleTestDatabase.logger)
            #expect(row?.state == "cancelled")
          }
        }
      }
    }
  }
}
