import Foundation
import Testing

@testable import JobKitPostgres

/// The cron parser and its next-time search, and which ticks a scheduler's plan finds due:
/// values without a database or a clock.
struct CronExpressionTests {
  static let utc = TimeZone(identifier: "UTC")!

  static func date(_ text: String) -> Date {
    try! Date(text + "Z", strategy: .iso8601)
  }

  static func next(_ expression: String, after text: String) throws -> Date? {
    try CronExpression(expression).next(after: date(text), in: utc)
  }

  @Test func valuesRangesListsAndSteps() throws {
    #expect(try CronExpression("5,10-20/5 * * * *").minutes == [5, 10, 15, 20])
    #expect(try CronExpression("*/20 * * * *").minutes == [0, 20, 40])
    #expect(try CronExpression("50/3 * * * *").minutes == [50, 53, 56, 59])
    #expect(try CronExpression("0 9-17/4 * * *").hours == [9, 13, 17])
    #expect(try CronExpression("* * * jan,JUL,Dec *").months == [1, 7, 12])
    #expect(try CronExpression("* * * * mon-fri").daysOfWeek == [1, 2, 3, 4, 5])
    #expect(try CronExpression("* * * * 7").daysOfWeek == [0])
    #expect(try CronExpression("* * * * 5-7").daysOfWeek == [5, 6, 0])
  }

  @Test func theNextMinuteTheExpressionNames() throws {
    #expect(try Self.next("30 2 * * *", after: "2026-03-01T00:00:00") == Self.date("2026-03-01T02:30:00"))
    // Strictly after: the same minute is not next.
    #expect(try Self.next("30 2 * * *", after: "2026-03-01T02:30:00") == Self.date("2026-03-02T02:30:00"))
    #expect(try Self.next("* * * * *", after: "2026-03-01T10:15:42") == Self.date("2026-03-01T10:16:00"))
    // 2026-03-06 is a Friday: after its 17:45, Monday 09:00.
    #expect(
      try Self.next("*/15 9-17 * * mon-fri", after: "2026-03-06T17:45:00") == Self.date("2026-03-09T09:00:00"))
    // Over a year's end, and a leap day (2028).
    #expect(try Self.next("0 0 1 1 *", after: "2026-12-15T00:00:00") == Self.date("2027-01-01T00:00:00"))
    #expect(try Self.next("0 12 29 2 *", after: "2026-03-01T00:00:00") == Self.date("2028-02-29T12:00:00"))
    // A day that never is.
    #expect(try Self.next("0 0 30 2 *", after: "2026-01-01T00:00:00") == nil)
  }

  @Test func bothDayFieldsRestrictedMatchEitherAsCronDoes() throws {
    // The 13th or any Friday: from Sunday 2026-03-01, Friday the 6th comes first, then the 13th
    // (a Friday too), then Friday the 20th.
    let expression = try CronExpression("0 0 13 * fri")
    var dates: [Date] = []
    var cursor = Self.date("2026-03-01T00:00:00")
    for _ in 0..<3 {
      cursor = try #require(expression.next(after: cursor, in: Self.utc))
      dates.append(cursor)
    }
    #expect(dates == ["2026-03-06", "2026-03-13", "2026-03-20"].map { Self.date($0 + "T00:00:00") })
    // One restricted: only that one counts.
    let the13th = try CronExpression("0 0 13 * *")
    #expect(the13th.matches(Self.date("2026-03-13T00:00:00"), in: Self.utc))
    #expect(!the13th.matches(Self.date("2026-03-06T00:00:00"), in: Self.utc))
    #expect(try CronExpression("0 0 * * fri").matches(Self.date("2026-03-13T00:00:00"), in: Self.utc))
    // A time zone moves the minutes: 09:00 in Tokyo is 00:00 UTC.
    let tokyo = TimeZone(identifier: "Asia/Tokyo")!
    #expect(
      try CronExpression("0 9 * * *").next(after: Self.date("2026-03-01T12:00:00"), in: tokyo)
        == Self.date("2026-03-02T00:00:00"))
  }

  @Test(arguments: [
    "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8",
    "5-1 * * * *", "*/0 * * * *", "a * * * *", "1,,2 * * * *", "1/2/3 * * * *", "* * * foo *", "-1 * * * *",
  ])
  func aMalformedExpressionIsAnInvalidConfiguration(_ text: String) {
    let error = #expect(throws: RemoteQueueError.self) { try CronExpression(text) }
    #expect(error?.code == .invalidConfiguration)
    #expect(error?.message.hasPrefix("cron expression '\(text)'") == true)
  }

  @Test func intervalTicksFallOnMultiplesAndKeysNameTheTick() throws {
    let schedule = try RemoteSchedule("ping", kind: "k", input: Data(), timing: .every(.seconds(10)))
    #expect(schedule.nextTick(after: Self.date("2026-01-01T00:00:05")) == Self.date("2026-01-01T00:00:10"))
    #expect(schedule.nextTick(after: Self.date("2026-01-01T00:00:10")) == Self.date("2026-01-01T00:00:20"))
    #expect(schedule.key(forTick: Self.date("2026-01-01T00:00:10")) == "schedule/ping/1767225610000")
    #expect(throws: RemoteQueueError.self) {
      try RemoteSchedule("", kind: "k", input: Data(), timing: .every(.seconds(1)))
    }
  }

  @Test func aPlanFindsEachTickOnceAndSkipsTheMissedOnes() throws {
    let every = try RemoteSchedule("every", kind: "k", input: Data(), timing: .every(.seconds(10)))
    let minute = try RemoteSchedule(
      "minute", kind: "k", input: Data(), timing: .cron(try CronExpression("* * * * *"), timeZone: Self.utc))
    var plan = RemoteSchedulerPlan(schedules: [every, minute], start: Self.date("2026-01-01T00:00:05"))
    #expect(plan.nextWake() == Self.date("2026-01-01T00:00:10"))
    #expect(plan.due(at: Self.date("2026-01-01T00:00:09")).isEmpty)
    let first = plan.due(at: Self.date("2026-01-01T00:00:10"))
    #expect(first.map(\.0) == [0] && first.map(\.1) == [Self.date("2026-01-01T00:00:10")])
    #expect(plan.due(at: Self.date("2026-01-01T00:00:10")).isEmpty)
    // Woken late, at 00:01:35: the latest tick of each, the ones between skipped.
    let late = plan.due(at: Self.date("2026-01-01T00:01:35"))
    #expect(late.map(\.0) == [0, 1])
    #expect(late.map(\.1) == [Self.date("2026-01-01T00:01:30"), Self.date("2026-01-01T00:01:00")])
    #expect(plan.nextWake() == Self.date("2026-01-01T00:01:40"))
  }
}
