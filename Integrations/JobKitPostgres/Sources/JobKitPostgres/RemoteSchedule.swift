import Foundation

/// A periodic task for a ``RemoteScheduler``: a task of a kind, with the same input each time,
/// every interval or at the minutes a ``CronExpression`` names.
///
/// ```swift
/// let cleanup = try RemoteSchedule("nightly-cleanup", kind: Cleanup.self, input: .all, cron: "30 2 * * *")
/// let ping = try RemoteSchedule("ping", kind: Ping.self, input: Ping.Input(), every: .seconds(60))
/// ```
///
/// Each tick's task has the key ``key(forTick:)``: the schedule's name and the tick's time, so
/// any number of schedulers insert each tick once. Interval ticks fall on multiples of the
/// interval since 1970-01-01 UTC (every scheduler computes the same ones); cron ticks are whole
/// minutes in the schedule's time zone.
public struct RemoteSchedule: Sendable {
  /// When the ticks fall.
  public enum Timing: Sendable, Hashable {
    /// Every interval, on multiples of it since 1970-01-01 UTC.
    case every(Duration)
    /// At the minutes the expression names, in the time zone.
    case cron(CronExpression, timeZone: TimeZone)
  }

  /// The schedule's name, part of each tick's key: unique among a queue's schedules.
  public let name: String
  /// The kind's ``RemoteTaskKind/name``.
  public let kind: String
  /// The JSON-encoded input of each tick's task.
  public let input: Data
  /// When the ticks fall.
  public let timing: Timing

  /// A task of `Kind` with `input` every `interval` (at least a millisecond). Throws
  /// ``RemoteQueueError/Code/invalidConfiguration`` for an empty name or an interval below 1 ms.
  public init<Kind: RemoteTaskKind>(_ name: String, kind: Kind.Type, input: Kind.Input, every interval: Duration)
    throws
  {
    guard interval >= .milliseconds(1) else {
      throw RemoteQueueError(
        .invalidConfiguration, message: "RemoteSchedule '\(name)': the interval \(interval) is below 1 ms")
    }
    try self.init(name, kind: Kind.name, input: JSONEncoder().encode(input), timing: .every(interval))
  }

  /// A task of `Kind` with `input` at the minutes `cron` names (``CronExpression``) in
  /// `timeZone` (UTC by default). Throws ``RemoteQueueError/Code/invalidConfiguration`` for an
  /// empty name or an expression that is not one.
  public init<Kind: RemoteTaskKind>(
    _ name: String, kind: Kind.Type, input: Kind.Input, cron: String,
    timeZone: TimeZone = TimeZone(identifier: "UTC")!
  ) throws {
    try self.init(
      name, kind: Kind.name, input: JSONEncoder().encode(input),
      timing: .cron(try CronExpression(cron), timeZone: timeZone))
  }

  init(_ name: String, kind: String, input: Data, timing: Timing) throws {
    guard !name.isEmpty else {
      throw RemoteQueueError(.invalidConfiguration, message: "RemoteSchedule: the name is empty")
    }
    self.name = name
    self.kind = kind
    self.input = input
    self.timing = timing
  }

  /// The first tick after `date`; `nil` if none comes (a cron expression of a day that never
  /// is, within 5 years).
  public func nextTick(after date: Date) -> Date? {
    switch timing {
    case .every(let interval):
      let milliseconds = Self.milliseconds(interval)
      let now = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
      let next = (now.quotientFloor(milliseconds) + 1) * milliseconds
      return Date(timeIntervalSince1970: Double(next) / 1000)
    case .cron(let expression, let timeZone):
      return expression.next(after: date, in: timeZone)
    }
  }

  /// The last tick at or before `date`; for a cron expression, the last within the day before
  /// `date` (`nil` if none fell in that day).
  func latestTick(atOrBefore date: Date) -> Date? {
    switch timing {
    case .every(let interval):
      let milliseconds = Self.milliseconds(interval)
      let now = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
      return Date(timeIntervalSince1970: Double(now.quotientFloor(milliseconds) * milliseconds) / 1000)
    case .cron:
      // Walks forward from a day before: a scheduler is rarely woken later than that.
      var latest: Date?
      var cursor = date.addingTimeInterval(-86_400)
      while let tick = nextTick(after: cursor), tick <= date {
        latest = tick
        cursor = tick
      }
      return latest
    }
  }

  /// The key of the tick at `tick`'s task: `schedule/NAME/MILLISECONDS` (since 1970, UTC).
  public func key(forTick tick: Date) -> String {
    "schedule/\(name)/\(Int64((tick.timeIntervalSince1970 * 1000).rounded()))"
  }

  static func milliseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
  }
}

extension Int64 {
  /// The quotient rounded down (towards minus infinity), for dates before 1970 too.
  fileprivate func quotientFloor(_ divisor: Int64) -> Int64 {
    let quotient = self / divisor
    return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
  }
}
