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

/// A durable task's children on its page: rows inserted with `parent_id` (as a durable handler's
/// `RemoteWork`s are, keys scoped with U+001F), read back through `RemoteQueue.taskTree` and
/// rendered through the router.
@Suite(.enabled(if: ConsoleTestDatabase.isAvailable, ConsoleTestDatabase.skipMessage), .timeLimit(.minutes(2)))
struct ConsoleTaskTreeTests {
  /// Inserts a row of `queue` and returns its id.
  static func insert(
    _ client: PostgresClient, queue: String, kind: String, key: String, state: String, parent: Int64?,
    started: Bool = true
  ) async throws -> Int64 {
    let finished = state == "completed" || state == "failed" || state == "cancelled"
    let rows = try await client.query(
      """
      INSERT INTO jobkit_remote_tasks
        (queue, kind, idempotency_key, input, max_attempts, state, attempt, parent_id, created_at,
         first_started_at, finished_at)
      VALUES (\(queue), \(kind), \(key), '\\x'::bytea, 3, \(state), \(started ? 1 : 0), \(parent),
        now() - interval '10 seconds', CASE WHEN \(started) THEN now() - interval '8 seconds' END,
        CASE WHEN \(finished) THEN now() - interval '2 seconds' END)
      RETURNING id
      """, logger: ConsoleTestDatabase.logger)
    for try await id in rows.decode(Int64.self) { return id }
    throw CancellationError()
  }

  @Test func aTwoLevelTreeRendersNestedWithLinksAndEscapedValues() async throws {
    try await ConsoleTestDatabase.withClient { client in
      let queue = try await ConsoleTestDatabase.makeQueue(client).name
      let root = try await Self.insert(client, queue: queue, kind: "order", key: "o-1", state: "running", parent: nil)
      let childA = try await Self.insert(
        client, queue: queue, kind: "charge", key: "o-1\u{1F}charge", state: "completed", parent: root)
      let childB = try await Self.insert(
        client, queue: queue, kind: "<script>k</script>", key: "o-1\u{1F}<script>x</script>", state: "failed",
        parent: root)
      let grandchild = try await Self.insert(
        client, queue: queue, kind: "ship", key: "o-1\u{1F}charge\u{1F}ship", state: "available", parent: childA,
        started: false)

      let tree = try #require(
        try await RemoteQueue.taskTree(client: client, id: root, logger: ConsoleTestDatabase.logger))
      #expect(tree.nodes.map(\.id) == [root, childA, grandchild, childB])
      #expect(tree.nodes.map(\.depth) == [0, 1, 2, 1])
      #expect(tree.nodes.map(\.localKey) == ["o-1", "charge", "ship", "<script>x</script>"])
      #expect(!tree.isCut)
      #expect(tree.parent == nil)

      let app = ConsoleTestDatabase.application(client, token: nil)
      try await app.test(.router) { http in
        let page = String(buffer: try await http.execute(uri: "/jobs/tasks/\(root)", method: .get).body)
        let section = try #require(page.range(of: "<section class=\"tree\">").map { String(page[$0.lowerBound...]) })
        // Nesting: the grandchild's list sits inside the first child's item, before the second child.
        let a = try #require(section.range(of: "<li data-id=\"\(childA)\">"))
        let g = try #require(section.range(of: "<ul><li data-id=\"\(grandchild)\">"))
        let b = try #require(section.range(of: "<li data-id=\"\(childB)\">"))
        #expect(a.upperBound <= g.lowerBound && g.upperBound <= b.lowerBound)
        let betweenAAndG = section[a.upperBound..<g.lowerBound]
        #expect(!betweenAAndG.contains("</li>"))
        #expect(section[g.upperBound..<b.lowerBound].contains("</li></ul></li>"))
        #expect(section.contains("<a href=\"/jobs/tasks/\(childA)\">charge</a>"))
        #expect(section.contains("<a href=\"/jobs/tasks/\(grandchild)\">ship</a>"))
        #expect(section.contains("<span class=\"key\">ship</span>"))
        // The timeline: one bar per row, colored by state.
        #expect(section.contains("<svg class=\"timeline\""))
        for (id, state) in [(root, "running"), (childA, "completed"), (childB, "failed"), (grandchild, "available")] {
          #expect(section.contains("<g class=\"bar\" data-id=\"\(id)\" data-state=\"\(state)\">"))
        }
        // Markup in a kind and a key is text.
        #expect(section.contains("&lt;script&gt;k&lt;/script&gt;"))
        #expect(section.contains("&lt;script&gt;x&lt;/script&gt;"))
        #expect(!page.contains("<script>k") && !page.contains("<script>x"))

        // The grandchild: a link up to its parent, and no tree of its own.
        let leaf = String(buffer: try await http.execute(uri: "/jobs/tasks/\(grandchild)", method: .get).body)
        #expect(leaf.contains("<a class=\"parent\" href=\"/jobs/tasks/\(childA)\">charge \(childA)</a>"))
        #expect(!leaf.contains("class=\"tree\""))
        #expect(!leaf.contains("<svg"))
        let escapedChild = String(buffer: try await http.execute(uri: "/jobs/tasks/\(childB)", method: .get).body)
        #expect(escapedChild.contains("<a class=\"parent\" href=\"/jobs/tasks/\(root)\">order \(root)</a>"))
      }
    }
  }

  @Test func aRowWithoutChildrenOrParentHasNoTreeNorParentLink() async throws {
    try await ConsoleTestDatabase.withClient { client in
      let queue = try await ConsoleTestDatabase.makeQueue(client).name
      let alone = try await Self.insert(
        client, queue: queue, kind: "alone", key: "alone", state: "completed", parent: nil)
      let tree = try #require(
        try await RemoteQueue.taskTree(client: client, id: alone, logger: ConsoleTestDatabase.logger))
      #expect(tree.nodes.map(\.id) == [alone])
      #expect(tree.parent == nil && !tree.isCut)
      #expect(try await RemoteQueue.taskTree(client: client, id: -1, logger: ConsoleTestDatabase.logger) == nil)
      let app = ConsoleTestDatabase.application(client, token: nil)
      try await app.test(.router) { http in
        let page = String(buffer: try await http.execute(uri: "/jobs/tasks/\(alone)", method: .get).body)
        #expect(page.contains("<dl class=\"task\">"))
        #expect(!page.contains("class=\"tree\"") && !page.contains("<svg") && !page.contains("class=\"parent\""))
      }
    }
  }

  @Test func theCapsAreReported() async throws {
    try await ConsoleTestDatabase.withClient { client in
      let queue = try await ConsoleTestDatabase.makeQueue(client).name
      let root = try await Self.insert(client, queue: queue, kind: "fan", key: "fan", state: "running", parent: nil)
      var children: [Int64] = []
      for index in 0..<6 {
        children.append(
          try await Self.insert(
            client, queue: queue, kind: "leaf", key: "fan\u{1F}\(index)", state: "completed", parent: root))
      }
      let deep = try await Self.insert(
        client, queue: queue, kind: "deep", key: "fan\u{1F}0\u{1F}deep", state: "completed", parent: children[0])
      let logger = ConsoleTestDatabase.logger

      let whole = try #require(try await RemoteQueue.taskTree(client: client, id: root, rowLimit: 8, logger: logger))
      #expect(whole.nodes.count == 8 && !whole.isCut)
      #expect(whole.nodes.contains { $0.id == deep })

      let cut = try #require(try await RemoteQueue.taskTree(client: client, id: root, rowLimit: 5, logger: logger))
      #expect(cut.isCut)
      #expect(cut.nodes.count == 5)
      #expect(cut.nodes.allSatisfy { $0.depth <= 1 })

      let shallow = try #require(
        try await RemoteQueue.taskTree(client: client, id: root, depthLimit: 1, logger: logger))
      #expect(shallow.isCut)
      #expect(shallow.nodes.count == 7 && !shallow.nodes.contains { $0.id == deep })

      let page = ConsolePages.taskTree(cut, paths: ConsolePaths(prefix: "/jobs"))
      #expect(page.rendered.contains("<p class=\"cut\">Cut: only the first 5 rows are shown.</p>"))
      #expect(!ConsolePages.taskTree(whole, paths: ConsolePaths(prefix: "/jobs")).rendered.contains("class=\"cut\""))
    }
  }
}
