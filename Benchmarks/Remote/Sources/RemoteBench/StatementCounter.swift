import Logging
import PostgresNIO

/// Counts the statements the database executed, other than the benchmark's own (tagged
/// `remote-bench` in a comment): each is one round trip, as postgres-nio sends every query with
/// its own sync.
///
/// With the `pg_stat_statements` extension loaded (`run.sh` loads it) the count is exact: the
/// sum of `calls`. Without it, the count is the database's transactions (`pg_stat_database`),
/// which a transaction of several statements counts once and which other backends report up to
/// a second late: an estimate, labelled as such.
struct StatementCounter: Sendable {
  /// Where the counts come from.
  enum Source: Sendable {
    case statements
    case transactions
  }

  let source: Source
  private let client: PostgresClient
  private let logger: Logger

  /// Uses `pg_stat_statements` if the server has it loaded, else transactions.
  static func make(client: PostgresClient, logger: Logger) async -> StatementCounter {
    do {
      try await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements /* remote-bench */", logger: logger)
      try await client.query("SELECT pg_stat_statements_reset() /* remote-bench */", logger: logger)
      return StatementCounter(source: .statements, client: client, logger: logger)
    } catch {
      return StatementCounter(source: .transactions, client: client, logger: logger)
    }
  }

  /// The count so far.
  func read() async throws -> Int {
    let query: PostgresQuery
    switch source {
    case .statements:
      query = """
        SELECT coalesce(sum(calls), 0)::bigint /* remote-bench */ FROM pg_stat_statements
        WHERE query NOT LIKE '%remote-bench%'
        """
    case .transactions:
      query = """
        SELECT (xact_commit + xact_rollback)::bigint /* remote-bench */ FROM pg_stat_database
        WHERE datname = current_database()
        """
    }
    for try await (count) in try await client.query(query, logger: logger).decode(Int64.self) {
      return Int(count)
    }
    return 0
  }
}

/// A statement's calls, rows and server time (execution and planning, ms).
typealias StatementFigures = (calls: Int, rows: Int, milliseconds: Double)

extension StatementCounter {
  /// Calls, rows and the server's time (execution and planning, ms) per statement text so far
  /// (`pg_stat_statements` only; empty otherwise).
  func breakdown() async throws -> [String: StatementFigures] {
    guard source == .statements else { return [:] }
    var result: [String: StatementFigures] = [:]
    let rows = try await client.query(
      """
      SELECT query, sum(calls)::bigint, sum(rows)::bigint,
        sum(total_exec_time + total_plan_time)::float8 /* remote-bench */ FROM pg_stat_statements
      WHERE query NOT LIKE '%remote-bench%' GROUP BY query
      """, logger: logger)
    for try await (query, calls, count, milliseconds) in rows.decode((String, Int64, Int64, Double).self) {
      result[query] = (Int(calls), Int(count), milliseconds)
    }
    return result
  }

  /// The statements between two breakdowns, most called first, one line each: calls per task,
  /// rows per call, the server's time per task (µs; planning counted with `track_planning`),
  /// and the statement's start.
  static func describe(
    from before: [String: StatementFigures],
    to after: [String: StatementFigures], tasks: Int
  ) -> String {
    var lines: [(Int, String)] = []
    for (query, figures) in after {
      let calls = figures.calls - (before[query]?.calls ?? 0)
      let rows = figures.rows - (before[query]?.rows ?? 0)
      let milliseconds = figures.milliseconds - (before[query]?.milliseconds ?? 0)
      guard calls > 0 else { continue }
      let text = query.split(whereSeparator: \.isWhitespace).joined(separator: " ").prefix(90)
      lines.append(
        (
          calls,
          String(
            format: "  %8.4f calls/task %9.1f rows/call %7.1f µs/task  ", Double(calls) / Double(tasks),
            Double(rows) / Double(calls), milliseconds * 1000 / Double(tasks)) + text
        ))
    }
    return lines.sorted { $0.0 > $1.0 }.map(\.1).joined(separator: "\n")
  }
}
