import Foundation
import Logging
import PostgresNIO

/// What an operators' console reads and writes: one statement per question, over every queue
/// in the table, and the two actions (retry, cancel) as the queue's own statements.
extension RemoteQueue {
  /// The tasks of one kind in one queue: counts by state, the wait of its oldest ready task,
  /// completions over the last minutes.
  public struct KindSummary: Sendable, Equatable {
    /// The queue's name.
    public let queue: String
    /// The kind's name.
    public let kind: String
    /// Rows by state (`available`, `running`, `completed`, `failed`, `cancelled`); absent states
    /// count 0.
    public let counts: [String: Int]
    /// Seconds since the oldest available row became due (`run_after`), `nil` when none is due.
    public let oldestAvailableAge: Double?
    /// Running rows whose lease expired (their worker stopped heartbeating).
    public let expiredLeases: Int
    /// Rows completed in the last minute.
    public let completedLastMinute: Int
    /// Rows completed in the last five minutes.
    public let completedLastFiveMinutes: Int

    /// The count of `state`, 0 if none.
    public func count(_ state: String) -> Int { counts[state] ?? 0 }
  }

  /// Which tasks a list shows; `nil` fields do not filter.
  public struct TaskFilter: Sendable, Equatable {
    /// Only this queue.
    public var queue: String?
    /// Only this kind.
    public var kind: String?
    /// Only this state.
    public var state: String?
    /// Only keys that start with this text (taken literally: `%` and `_` are no wildcards).
    public var keyPrefix: String?
    /// With ``inputValue``: only inputs (JSON, as ``RemoteWork`` stores them) whose field at this
    /// path (names joined by `.`, as `customer.id`) has that value as text.
    public var inputField: String?
    /// The value ``inputField`` must have, as text (`42`, `true`, `acme`).
    public var inputValue: String?

    /// A filter; every field optional.
    public init(
      queue: String? = nil, kind: String? = nil, state: String? = nil, keyPrefix: String? = nil,
      inputField: String? = nil, inputValue: String? = nil
    ) {
      self.queue = queue
      self.kind = kind
      self.state = state
      self.keyPrefix = keyPrefix
      self.inputField = inputField
      self.inputValue = inputValue
    }
  }

  /// A place in a list ordered newest first: the rows after it are those created before
  /// `createdMicroseconds` (microseconds since 1970, as the database stores them), or at the
  /// same time with a smaller id.
  public struct TaskCursor: Sendable, Equatable, Hashable {
    /// The row's `created_at`, in microseconds since 1970.
    public let createdMicroseconds: Int64
    /// The row's id.
    public let id: Int64

    /// A cursor after the row created at `createdMicroseconds` with `id`.
    public init(createdMicroseconds: Int64, id: Int64) {
      self.createdMicroseconds = createdMicroseconds
      self.id = id
    }
  }

  /// One row as a console shows it. Input and output are previews: their first bytes only.
  public struct TaskSnapshot: Sendable, Equatable {
    /// The row's id.
    public let id: Int64
    /// The queue's name.
    public let queue: String
    /// The kind's name.
    public let kind: String
    /// The task's key.
    public let idempotencyKey: String
    /// `available`, `running`, `completed`, `failed` or `cancelled`.
    public let state: String
    /// Runs so far (the running one included).
    public let attempt: Int
    /// The most runs.
    public let maxAttempts: Int
    /// The worker that claimed it last, if any.
    public let owner: String?
    /// Seconds until the lease expires (negative: expired that long ago); `nil` without a lease.
    public let leaseExpiresIn: Double?
    /// Seconds until it may run (negative: due that long ago).
    public let runAfterIn: Double
    /// Whether a cancel was asked for.
    public let cancelRequested: Bool
    /// The stored error of the last failed run, if any.
    public let errorMessage: String?
    /// The first bytes of the input.
    public let inputPreview: Data
    /// The input's length in bytes.
    public let inputLength: Int
    /// The first bytes of the output, if any.
    public let outputPreview: Data?
    /// The output's length in bytes, 0 without one.
    public let outputLength: Int
    /// Seconds since the row was created.
    public let age: Double
    /// Seconds since the row became final, `nil` while it is not.
    public let finishedAgo: Double?
    /// The cursor of this row (the next page starts after it).
    public let cursor: TaskCursor
  }

  /// The most bytes of an input or output a snapshot carries.
  public static let previewLength = 2048

  /// Every queue and kind in the table with its counts, in one statement.
  public static func kindSummaries(client: PostgresClient, logger: Logger) async throws -> [KindSummary] {
    let rows = try await client.query(
      """
      SELECT queue, kind,
        count(*) FILTER (WHERE state = 'available')::bigint,
        count(*) FILTER (WHERE state = 'running')::bigint,
        count(*) FILTER (WHERE state = 'completed')::bigint,
        count(*) FILTER (WHERE state = 'failed')::bigint,
        count(*) FILTER (WHERE state = 'cancelled')::bigint,
        extract(epoch FROM now() - min(run_after) FILTER (WHERE state = 'available' AND run_after <= now()))::float8,
        count(*) FILTER (WHERE state = 'running' AND lease_expires_at < now())::bigint,
        count(*) FILTER (WHERE state = 'completed' AND finished_at > now() - interval '1 minute')::bigint,
        count(*) FILTER (WHERE state = 'completed' AND finished_at > now() - interval '5 minutes')::bigint
      FROM jobkit_remote_tasks GROUP BY queue, kind ORDER BY queue, kind
      """, logger: logger)
    var result: [KindSummary] = []
    for try await row in rows.decode(
      (String, String, Int64, Int64, Int64, Int64, Int64, Double?, Int64, Int64, Int64).self)
    {
      let counts = [
        "available": Int(row.2), "running": Int(row.3), "completed": Int(row.4), "failed": Int(row.5),
        "cancelled": Int(row.6),
      ]
      result.append(
        KindSummary(
          queue: row.0, kind: row.1, counts: counts, oldestAvailableAge: row.7, expiredLeases: Int(row.8),
          completedLastMinute: Int(row.9), completedLastFiveMinutes: Int(row.10)))
    }
    return result
  }

  /// At most `limit` rows matching `filter`, newest first (`created_at`, then `id`), after
  /// `cursor` (keyset paging: no `OFFSET`), in one statement. A filter on the input's field reads
  /// every input of the other filters' rows as JSON: one that is not fails the statement.
  public static func tasks(
    client: PostgresClient, filter: TaskFilter, after cursor: TaskCursor?, limit: Int, logger: Logger
  ) async throws -> [TaskSnapshot] {
    let escapedPrefix = filter.keyPrefix.map { prefix in
      prefix.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
        .replacingOccurrences(of: "_", with: "\\_") + "%"
    }
    // The input's field: only when both halves are given.
    let inputPath = filter.inputValue == nil ? nil : filter.inputField.map { $0.split(separator: ".").map(String.init) }
    let inputValue = inputPath == nil ? nil : filter.inputValue
    let limit = Int32(clamping: max(1, limit))
    let query: PostgresQuery = """
      SELECT \(unescaped: snapshotColumns) FROM jobkit_remote_tasks
      WHERE (\(filter.queue)::text IS NULL OR queue = \(filter.queue))
        AND (\(filter.kind)::text IS NULL OR kind = \(filter.kind))
        AND (\(filter.state)::text IS NULL OR state = \(filter.state))
        AND (\(escapedPrefix)::text IS NULL OR idempotency_key LIKE \(escapedPrefix))
        AND (\(inputValue)::text IS NULL OR convert_from(input, 'UTF8')::jsonb #>> \(inputPath)::text[] = \(inputValue))
        AND (\(cursor?.createdMicroseconds)::bigint IS NULL
          OR (created_at, id) < (
            timestamptz 'epoch' + \(cursor?.createdMicroseconds)::bigint * interval '1 microsecond',
            \(cursor?.id)::bigint))
      ORDER BY created_at DESC, id DESC LIMIT \(limit)
      """
    return try await snapshots(client.query(query, logger: logger))
  }

  /// The row with id `id`, or `nil`, in one statement.
  public static func task(client: PostgresClient, id: Int64, logger: Logger) async throws -> TaskSnapshot? {
    let rows = try await client.query(
      "SELECT \(unescaped: snapshotColumns) FROM jobkit_remote_tasks WHERE id = \(id)", logger: logger)
    return try await snapshots(rows).first
  }

  /// Puts a failed or cancelled task of this queue back to `available`, due now, with
  /// ``Configuration/maxAttempts`` more attempts, through the statement
  /// ``retryFailed(idempotencyKeys:)`` uses. Its stored error, output and cancel request are
  /// cleared; its attempt count stays (the fence of stale workers). Returns whether a row
  /// changed (`false`: no such row in this queue, or not failed nor cancelled).
  public func retryTask(id: Int64) async throws -> Bool {
    try await !armAgain(ids: [id], keys: [], states: ["failed", "cancelled"]).isEmpty
  }

  /// Cancels the task with key `key` as a job's cancel does (the same statement): a row nobody
  /// runs is cancelled at once; a running one is marked, and its worker cancels the handler at
  /// its next heartbeat. A final row is left as it is.
  public func cancelTask(idempotencyKey key: String) async throws {
    try await requestCancel(key: key, generation: nil)
  }

  /// A task and its descendants: the rows its handler's ``RemoteWork``s created (`parent_id`),
  /// theirs, and so on; and the task's own parent, if any.
  public struct TaskTree: Sendable, Equatable {
    /// One row of the tree. Times are seconds before the read (`nil`: not yet).
    public struct Node: Sendable, Equatable {
      /// The row's id.
      public let id: Int64
      /// The row's parent (`nil` for a task that no handler created).
      public let parentID: Int64?
      /// 0 for the task the tree was read from, 1 for its children, and so on.
      public let depth: Int
      /// The kind's name.
      public let kind: String
      /// The row's whole key.
      public let idempotencyKey: String
      /// The key as its handler named it: the part after its parent's key and U+001F (the
      /// whole key when it is not scoped that way).
      public let localKey: String
      /// `available`, `running`, `completed`, `failed` or `cancelled`.
      public let state: String
      /// Runs so far.
      public let attempt: Int
      /// The most runs.
      public let maxAttempts: Int
      /// Seconds since the row was created.
      public let createdAgo: Double
      /// Seconds since its first run started, `nil` if it never ran.
      public let firstStartedAgo: Double?
      /// Seconds since it became final, `nil` while it is not.
      public let finishedAgo: Double?
    }

    /// The task's parent: the row whose handler created it.
    public struct Parent: Sendable, Equatable {
      /// The parent's id.
      public let id: Int64
      /// The parent's kind.
      public let kind: String
      /// The parent's key.
      public let idempotencyKey: String
    }

    /// The task first, then its descendants depth first (children by creation, then id).
    public let nodes: [Node]
    /// The task's parent, `nil` if it has none (or it was deleted).
    public let parent: Parent?
    /// Whether rows were left out: more than the row limit, or deeper than the depth limit.
    public let isCut: Bool

    /// The task the tree was read from.
    public var root: Node { nodes[0] }

    /// The rows whose parent is `id`, in ``nodes``'s order.
    public func children(of id: Int64) -> [Node] { nodes.filter { $0.parentID == id && $0.depth > 0 } }
  }

  /// The task with id `id` and its descendants over `parent_id`, at most `rowLimit` rows (the
  /// task included) and `depthLimit` levels below it, with its parent, in one statement (a
  /// recursive query that stops once it has one row more than the limit); `nil` without such
  /// a row. ``TaskTree/isCut`` says whether rows were left out.
  public static func taskTree(
    client: PostgresClient, id: Int64, rowLimit: Int = 500, depthLimit: Int = 32, logger: Logger
  ) async throws -> TaskTree? {
    let rowLimit = max(1, rowLimit)
    let depthLimit = Int32(clamping: max(0, depthLimit))
    let fetched = Int32(clamping: rowLimit + 1)
    let query: PostgresQuery = """
      WITH RECURSIVE tree(id, depth) AS (
        SELECT id, 0 FROM jobkit_remote_tasks WHERE id = \(id)
        UNION ALL
        SELECT c.id, t.depth + 1 FROM tree t JOIN jobkit_remote_tasks c ON c.parent_id = t.id
        WHERE t.depth <= \(depthLimit)
      ), kept AS (SELECT id, depth FROM tree LIMIT \(fetched))
      SELECT r.id, r.parent_id, k.depth, r.kind, r.idempotency_key, r.state, r.attempt, r.max_attempts,
        extract(epoch FROM now() - r.created_at)::float8, extract(epoch FROM now() - r.first_started_at)::float8,
        extract(epoch FROM now() - r.finished_at)::float8, p.id, p.kind, p.idempotency_key
      FROM kept k JOIN jobkit_remote_tasks r ON r.id = k.id
      LEFT JOIN jobkit_remote_tasks p ON k.depth = 0 AND p.id = r.parent_id
      ORDER BY k.depth, r.created_at, r.id
      """
    var rows: [(node: TaskTree.Node, parent: TaskTree.Parent?)] = []
    var keys: [Int64: String] = [:]
    for try await row in try await client.query(query, logger: logger).decode(
      (
        Int64, Int64?, Int32, String, String, String, Int32, Int32, Double, Double?, Double?, Int64?, String?,
        String?
      ).self)
    {
      keys[row.0] = row.4
      let parentKey = row.2 == 0 ? nil : row.1.flatMap { keys[$0] }
      var localKey = row.4
      if let parentKey, row.4.hasPrefix(parentKey + "\u{1F}") {
        localKey = String(row.4.dropFirst(parentKey.count + 1))
      }
      let node = TaskTree.Node(
        id: row.0, parentID: row.1, depth: Int(row.2), kind: row.3, idempotencyKey: row.4, localKey: localKey,
        state: row.5, attempt: Int(row.6), maxAttempts: Int(row.7), createdAgo: row.8, firstStartedAgo: row.9,
        finishedAgo: row.10)
      let parent = row.11.map { TaskTree.Parent(id: $0, kind: row.12 ?? "", idempotencyKey: row.13 ?? "") }
      rows.append((node, parent))
    }
    guard let root = rows.first, root.node.depth == 0 else { return nil }
    let isCut = rows.count > rowLimit || rows.contains { $0.node.depth > Int(depthLimit) }
    let kept = rows.prefix(rowLimit).map { $0.node }.filter { $0.depth <= Int(depthLimit) }
    // Depth first: each node followed by its children (rows came level by level).
    var children: [Int64: [TaskTree.Node]] = [:]
    for node in kept.dropFirst() { children[node.parentID ?? 0, default: []].append(node) }
    var ordered: [TaskTree.Node] = []
    var stack = [root.node]
    while let node = stack.popLast() {
      ordered.append(node)
      stack.append(contentsOf: (children[node.id] ?? []).reversed())
    }
    return TaskTree(nodes: ordered, parent: root.parent, isCut: isCut)
  }

  private static let snapshotColumns = """
    id, queue, kind, idempotency_key, state, attempt, max_attempts, owner,
    extract(epoch FROM lease_expires_at - now())::float8, extract(epoch FROM run_after - now())::float8,
    cancel_requested, error_message, substring(input FROM 1 FOR \(previewLength)), octet_length(input),
    substring(output FROM 1 FOR \(previewLength)), coalesce(octet_length(output), 0),
    extract(epoch FROM now() - created_at)::float8, extract(epoch FROM now() - finished_at)::float8,
    (extract(epoch FROM created_at) * 1000000)::bigint
    """

  private static func snapshots(_ rows: PostgresRowSequence) async throws -> [TaskSnapshot] {
    var result: [TaskSnapshot] = []
    for try await row in rows {
      let columns = try row.decode(
        (
          Int64, String, String, String, String, Int32, Int32, String?, Double?, Double, Bool, String?, Data,
          Int32, Data?, Int32, Double, Double?, Int64
        ).self)
      result.append(
        TaskSnapshot(
          id: columns.0, queue: columns.1, kind: columns.2, idempotencyKey: columns.3, state: columns.4,
          attempt: Int(columns.5), maxAttempts: Int(columns.6), owner: columns.7, leaseExpiresIn: columns.8,
          runAfterIn: columns.9, cancelRequested: columns.10, errorMessage: columns.11, inputPreview: columns.12,
          inputLength: Int(columns.13), outputPreview: columns.14, outputLength: Int(columns.15), age: columns.16,
          finishedAgo: columns.17, cursor: TaskCursor(createdMicroseconds: columns.18, id: columns.0)))
    }
    return result
  }
}
