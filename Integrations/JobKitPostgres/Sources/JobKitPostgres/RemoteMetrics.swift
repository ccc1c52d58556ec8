import CoreMetrics
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle

/// A worker's metrics through swift-metrics, each with the dimension `queue` (and `kind` for a
/// task's): see ``RemoteWorker/Configuration/metricsFactory``.
struct RemoteMetrics: Sendable {
  let queue: String
  let factory: any MetricsFactory

  /// A row was claimed `seconds` after it became due (`run_after`).
  func claimed(kind: String, waitedSeconds seconds: Double) {
    Timer(label: "jobkit_remote_claim_wait", dimensions: dimensions(kind), factory: factory)
      .recordNanoseconds(Int64(max(0, seconds) * 1e9))
  }

  /// A handler ran for `duration` (claim to end).
  func ran(kind: String, for duration: Duration) {
    let (seconds, attoseconds) = duration.components
    Timer(label: "jobkit_remote_run_duration", dimensions: dimensions(kind), factory: factory)
      .recordNanoseconds(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
  }

  /// A handler's outcome was stored as the row's `state` (`nil`: rejected by the fence, stale).
  func stored(kind: String, state: String?) {
    let label: String
    switch state {
    case nil: label = "jobkit_remote_stale_completions_total"
    case "available": label = "jobkit_remote_retries_total"
    case "failed": label = "jobkit_remote_failures_total"
    default: return
    }
    Counter(label: label, dimensions: dimensions(kind), factory: factory).increment()
  }

  /// A prune deleted `rows` finished rows.
  func pruned(_ rows: Int) {
    Counter(label: "jobkit_remote_pruned_rows_total", dimensions: [("queue", queue)], factory: factory)
      .increment(by: Int64(rows))
  }

  private func dimensions(_ kind: String) -> [(String, String)] {
    [("queue", queue), ("kind", kind)]
  }
}

/// Polls the number of tasks by state of every queue in the database into swift-metrics gauges,
/// as a service-lifecycle `Service`: `jobkit_remote_tasks` (dimensions `queue`, `state`: one of
/// `available`, `running`, `completed`, `failed`, `cancelled`), every ``interval``.
///
/// ```swift
/// let gauges = RemoteQueueMetrics(client: client, interval: .seconds(15), logger: logger)
/// let group = ServiceGroup(services: [client, gauges, worker], gracefulShutdownSignals: [.sigterm], logger: logger)
/// ```
///
/// One instance per database is enough (it counts every queue in one statement). A poll that
/// fails is logged at info and tried again at the next interval.
public final class RemoteQueueMetrics: Service, Sendable {
  /// The client the counts are read through.
  public let client: PostgresClient
  /// How often the counts are read.
  public let interval: Duration
  let factory: any MetricsFactory
  let logger: Logger

  /// Gauges of `client`'s queues every `interval` (10 s by default) into `factory` (the
  /// bootstrapped `MetricsSystem.factory` by default).
  public init(
    client: PostgresClient, interval: Duration = .seconds(10), factory: any MetricsFactory = MetricsSystem.factory,
    logger: Logger = Logger(label: "JobKitPostgres.RemoteQueueMetrics")
  ) {
    self.client = client
    self.interval = interval
    self.factory = factory
    self.logger = logger
  }

  static let states = ["available", "running", "completed", "failed", "cancelled"]

  /// Reads the counts once and sets the gauges (a state without rows reads 0).
  public func record() async throws {
    let rows = try await client.query(
      "SELECT queue, state, count(*)::bigint FROM jobkit_remote_tasks GROUP BY queue, state", logger: logger)
    var counts: [String: [String: Int64]] = [:]
    for try await (queue, state, count) in rows.decode((String, String, Int64).self) {
      counts[queue, default: [:]][state] = count
    }
    for (queue, byState) in counts {
      for state in Self.states {
        Gauge(label: "jobkit_remote_tasks", dimensions: [("queue", queue), ("state", state)], factory: factory)
          .record(byState[state] ?? 0)
      }
    }
  }

  /// Records every ``interval`` until cancelled or shut down gracefully.
  public func run() async throws {
    try await cancelWhenGracefulShutdown {
      while !Task.isCancelled {
        do {
          try await self.record()
        } catch {
          if Task.isCancelled { return }
          self.logger.log(
            level: .info, "reading the queues' counts failed; trying again at the next interval",
            metadata: ["error": "\(String(reflecting: error))"])
        }
        try await Task.sleep(for: self.interval)
      }
    }
  }
}
