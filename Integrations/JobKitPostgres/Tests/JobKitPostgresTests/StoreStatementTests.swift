import Foundation
import PostgresNIO
import Testing

@testable import JobKitPostgres

extension DatabaseTests {
  /// The worker's store of outcomes (`jobkit_remote_store_outcomes`, schema version 8) and its
  /// claim (`jobkit_remote_claim`, version 9) and the job's insert (`jobkit_remote_insert_rows`,
  /// version 10) against the real server: their cached plans, and the results the store notifies.
  @Suite
  struct StoreStatementTests {
    /// The store as schema version 7 sent it: a join of the outcomes and the table, which a
    /// generic plan made on a small table answers with whole-table scans.
    static let joinedStore = """
      WITH c AS (
        SELECT * FROM unnest($2::bigint[], $3::integer[], $4::integer[], $5::bytea[], $6::text[], $7::float8[],
          $8::text[]) AS c(id, attempt, outcome, output, message, delay, code)
      ), locked AS (
        SELECT t.id FROM jobkit_remote_tasks t JOIN c ON t.id = c.id WHERE t.owner = $1 ORDER BY t.id FOR UPDATE OF t
      ), stored AS (
        UPDATE jobkit_remote_tasks t SET state = 'completed', output = c.output, finished_at = now()
        FROM c JOIN locked ON locked.id = c.id
        WHERE t.id = c.id AND t.attempt = c.attempt AND t.owner = $1 AND t.state = 'running'
        RETURNING t.id, t.state
      )
      SELECT id, state FROM stored
      UNION ALL
      SELECT t.id, t.state FROM jobkit_remote_tasks t JOIN c ON t.id = c.id AND t.attempt = c.attempt
      WHERE t.owner = $1 AND t.state <> 'running' AND $9::text IS NULL
      """

    /// The generic plan (the one a session keeps) of `query` under the store function's own
    /// settings, on a copy of the table with `rows` rows, analyzed, in a schema of its own.
    static func genericPlan(
      _ client: PostgresClient, query: String, settings: [String], rows: Int, state: String = "running",
      types: String = "text, bigint[], integer[], integer[], bytea[], text[], float8[], text[], text",
      arguments: String =
        #"'owner', '{1,2}', '{1,1}', '{0,0}', '{"\\x00","\\x00"}', '{"",""}', '{0,0}', '{"",""}', NULL"#
    ) async throws -> [String] {
      let schema = "plans_\(UUID().uuidString.prefix(8).lowercased())"
      return try await client.withConnection { connection in
        let logger = TestDatabase.logger
        try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: logger)
        do {
          for statement in [
            "CREATE TABLE \(schema).jobkit_remote_tasks (LIKE public.jobkit_remote_tasks INCLUDING ALL)",
            """
            INSERT INTO \(schema).jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state,
              attempt, owner)
            SELECT 'plans', 'echo', 'key-' || n, '\\x7b7d', 5, '\(state)', 1, 'owner' FROM generate_series(1, \(rows)) n
            """,
            "ANALYZE \(schema).jobkit_remote_tasks",
            "BEGIN",
            "SET LOCAL search_path = \(schema), public",
            "SET LOCAL plan_cache_mode = force_generic_plan",
          ] + settings.map({ "SET LOCAL \($0.replacingOccurrences(of: "=", with: " = "))" }) + [
            """
            PREPARE \(schema)(\(types)) AS \(query)
            """
          ] {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
          }
          var plan: [String] = []
          for try await (line) in try await connection.query(
            PostgresQuery(
              unsafeSQL: "EXPLAIN EXECUTE \(schema)(\(arguments))"), logger: logger
          ).decode(String.self) {
            plan.append(line)
          }
          for statement in ["DEALLOCATE \(schema)", "ROLLBACK", "DROP SCHEMA \(schema) CASCADE"] {
            try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
          }
          return plan
        } catch {
          _ = try? await connection.query("ROLLBACK", logger: logger)
          _ = try? await connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"), logger: logger)
          throw error
        }
      }
    }

    /// The scans of the table in `plan` that read it whole: a sequential scan, a bitmap scan,
    /// an index read without a condition (the primary key probed by id, and a partial index read
    /// for a queue, are not).
    static func wholeTableScans(_ plan: [String]) -> [String] {
      var scans: [String] = []
      for (index, line) in plan.enumerated() where line.contains(" on jobkit_remote_tasks") {
        if line.contains("Update on jobkit_remote_tasks") || line.contains("Insert on jobkit_remote_tasks") {
          continue
        }
        let next = index + 1 < plan.count ? plan[index + 1] : ""
        if line.contains("Index Scan using jobkit_remote_tasks_pkey") && next.contains("Index Cond: (id = ") {
          continue
        }
        if line.contains("Index") && line.contains("Scan using jobkit_remote_tasks_")
          && next.contains("Index Cond: ((queue = $1)")
        {
          continue
        }
        scans.append(line.trimmingCharacters(in: .whitespaces))
      }
      return scans
    }

    /// Expects the plan `plan(rows)` gives at each of `sizes` to contain `probe` at least `count`
    /// times and to read no whole table (``wholeTableScans(_:)``).
    static func expectEachPlan(
      at sizes: [Int], probes probe: String, atLeast count: Int = 1, _ plan: (Int) async throws -> [String]
    ) async throws {
      for rows in sizes {
        let lines = try await plan(rows)
        let text = "at \(rows) rows:\n\(lines.joined(separator: "\n"))"
        #expect(lines.filter { $0.contains(probe) }.count >= count, "\(text)")
        #expect(wholeTableScans(lines).isEmpty, "\(text)")
      }
    }

    /// A function's query (the body's `RETURN QUERY`) and its settings, as the server has them.
    static func function(_ client: PostgresClient, _ name: String = "jobkit_remote_store_outcomes") async throws
      -> (query: String, settings: [String])
    {
      var found: (String, [String])?
      for try await (source, settings) in try await client.query(
        "SELECT prosrc, proconfig FROM pg_proc WHERE proname = \(name)"
      ).decode((String, [String]?).self) {
        found = (source, settings ?? [])
      }
      let (source, settings) = try #require(found)
      let start = try #require(source.range(of: "RETURN QUERY"))
      let end = try #require(source.range(of: ";", options: .backwards, range: start.upperBound..<source.endIndex))
      return (String(source[start.upperBound..<end.lowerBound]), settings)
    }

    /// The plan a session keeps of the store probes the primary key by id, on a table of 10 rows
    /// as of 100,000: a plan made while the table is small stays good as it grows. The store of
    /// version 7, under the same settings, does not (the check finds its scans).
    @Test func theStoresCachedPlanProbesThePrimaryKeyAtAnyTableSize() async throws {
      try await TestDatabase.withClient { client in
        _ = try await TestDatabase.makeQueue(client)
        let (query, settings) = try await Self.function(client)
        #expect(settings.contains("enable_seqscan=off"))
        try await Self.expectEachPlan(at: [10, 100_000], probes: "Index Cond: (id = ", atLeast: 3) { rows in
          try await Self.genericPlan(client, query: query, settings: settings, rows: rows)
        }
        let joined = try await Self.genericPlan(client, query: Self.joinedStore, settings: settings, rows: 10)
        #expect(!Self.wholeTableScans(joined).isEmpty, "\(joined.joined(separator: "\n"))")
        let unset = try await Self.genericPlan(client, query: query, settings: [], rows: 10)
        #expect(!Self.wholeTableScans(unset).isEmpty, "\(unset.joined(separator: "\n"))")
      }
    }

    /// The plan a session keeps of the claim reads the queue's partial indexes and probes the
    /// primary key, on a table of 100 available rows (a generic plan made there without the
    /// function's settings reads it whole) as of 100,000.
    @Test func theClaimsCachedPlanReadsNoWholeTableAtAnySize() async throws {
      try await TestDatabase.withClient { client in
        _ = try await TestDatabase.makeQueue(client)
        let (query, settings) = try await Self.function(client, "jobkit_remote_claim")
        #expect(settings.contains("enable_seqscan=off"))
        let claim = (types: "text, integer, boolean, text, float8", arguments: "'plans', 16, true, 'owner-2', 30")
        try await Self.expectEachPlan(at: [100, 100_000], probes: "Index Cond: (id = ") { rows in
          try await Self.genericPlan(
            client, query: query, settings: settings, rows: rows, state: "available", types: claim.types,
            arguments: claim.arguments)
        }
        let unset = try await Self.genericPlan(
          client, query: query, settings: [], rows: 100, state: "available", types: claim.types,
          arguments: claim.arguments)
        #expect(!Self.wholeTableScans(unset).isEmpty, "\(unset.joined(separator: "\n"))")
      }
    }

    /// The plan a session keeps of the job's insert (`jobkit_remote_insert_rows`, version 10)
    /// finds each key's earlier row by one probe of the (queue, key) index, on a table of 10 rows
    /// as of 100,000. The insert of version 9 (a prepared statement that filtered the queue's
    /// rows by the keys) read every row of the queue at each batch with the plan made on a small
    /// table: the check finds its scan.
    @Test func theInsertsCachedPlanProbesEachKeyAtAnyTableSize() async throws {
      try await TestDatabase.withClient { client in
        _ = try await TestDatabase.makeQueue(client)
        let (query, settings) = try await Self.function(client, "jobkit_remote_insert_rows")
        #expect(settings.contains("enable_seqscan=off"))
        let insert = (
          types: "text, text[], text[], bytea[], integer, float8[], text[], bigint[]",
          arguments: #"'plans', '{echo,echo}', '{key-1,new}', '{"\\x00","\\x00"}', 5, '{0,0}', '{"",""}', '{0,0}'"#
        )
        let probe = "Index Cond: ((queue = $1) AND (idempotency_key = k.key))"
        try await Self.expectEachPlan(at: [10, 100_000], probes: probe) { rows in
          try await Self.genericPlan(
            client, query: query, settings: settings, rows: rows, state: "completed", types: insert.types,
            arguments: insert.arguments)
        }
        let union = try #require(query.range(of: "UNION ALL"))
        let filtered =
          String(query[..<union.upperBound]) + """

            SELECT id, idempotency_key, generation, false, state, output, error_message, attempt, error_code
            FROM jobkit_remote_tasks WHERE queue = $1 AND idempotency_key = ANY($3::text[])
            """
        let old = try await Self.genericPlan(
          client, query: filtered, settings: [], rows: 10, state: "completed", types: insert.types,
          arguments: insert.arguments)
        #expect(!Self.wholeTableScans(old).isEmpty, "\(old.joined(separator: "\n"))")
      }
    }

    /// A store notifies its completed rows' results in one notification, before the trigger's
    /// notifications of their ids; a result too large for it, and a failure, only by id.
    @Test func aStoreNotifiesTheCompletedResultsBeforeTheirIds() async throws {
      try await TestDatabase.withClient { client in
        let queue = try await TestDatabase.makeQueue(client)
        let channel = try await queue.channels().done
        var ids: [Int64] = []
        for try await (id) in try await client.query(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts, state, attempt, owner)
          SELECT \(queue.name), 'echo', 'key-' || n, '\\x00', 5, 'running', 1, 'owner' FROM generate_series(1, 4) n
          RETURNING id
          """
        ).decode(Int64.self) {
          ids.append(id)
        }
        ids.sort()
        let large = Data(repeating: 0x41, count: 9_000)
        let outputs = [Data("{\"a\":1}".utf8), Data(), large, Data()]
        let store = StoreOutcomesStatement(
          owner: "owner", ids: ids, attempts: [1, 1, 1, 1], outcomes: [0, 0, 0, 1],
          outputs: outputs.map { ByteBuffer(bytes: $0) }, messages: ["", "", "", "failed"], delays: [0, 0, 0, 0],
          codes: ["", "", "", "handlerFailed"], queue: queue.name)
        let (stored, payloads) = try await TestDatabase.notifications(on: channel, client) {
          try await queue.prepared(store)
        }
        #expect(
          Dictionary(uniqueKeysWithValues: stored.map { ($0.0, $0.1) }) == [
            ids[0]: "completed", ids[1]: "completed", ids[2]: "completed", ids[3]: "failed",
          ])
        #expect(Array(payloads.dropFirst()) == ids.map { "\($0)" })
        let delivered = RemoteResultRouter.completedRows(try #require(payloads.first))
        #expect(delivered.map(\.0) == [ids[0], ids[1]])
        #expect(delivered.map(\.1.output) == [outputs[0], Data()])
        #expect(delivered.allSatisfy { $0.1.state == "completed" && $0.1.attempt == 1 })
      }
    }
  }
}
