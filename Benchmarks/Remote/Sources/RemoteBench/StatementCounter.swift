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
