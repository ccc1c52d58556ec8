import Foundation

/// A 5-field cron expression, `minute hour day-of-month month day-of-week`, as cron reads it:
/// each field `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`, or a list of those
/// (`1,15,30-40/5`). Months may be named `jan`–`dec`, days `sun`–`sat` (any case); day 0 and 7
/// are both Sunday. When both day fields are restricted (neither starts with `*`), a day that
/// matches **either** matches, as in cron; otherwise both must.
///
/// ```swift
/// let nightly = try CronExpression("30 2 * * *")        // 02:30 every day
/// let weekdays = try CronExpression("*/15 9-17 * * mon-fri")
/// let next = nightly.next(after: Date(), in: TimeZone(identifier: "UTC")!)
/// ```
///
/// An expression that is not one throws ``RemoteQueueError`` with code
/// ``RemoteQueueError/Code/invalidConfiguration``, naming the field.
public struct CronExpression: Sendable, Hashable, CustomStringConvertible {
  /// The expression as written.
  public let description: String
  let minutes: Set<Int>
  let hours: Set<Int>
  let daysOfMonth: Set<Int>
  let months: Set<Int>
  /// 0 (Sunday) to 6.
  let daysOfWeek: Set<Int>
  let dayOfMonthRestricted: Bool
  let dayOfWeekRestricted: Bool

  /// Reads `text`; throws ``RemoteQueueError/Code/invalidConfiguration`` if it is no 5-field
  /// cron expression.
  public init(_ text: String) throws {
    let fields = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    guard fields.count == 5 else {
      throw Self.invalid(text, "it has \(fields.count) fields, not 5 (minute hour day-of-month month day-of-week)")
    }
    description = text
    minutes = try Self.parse(fields[0], name: "minute", range: 0...59, names: [:], in: text)
    hours = try Self.parse(fields[1], name: "hour", range: 0...23, names: [:], in: text)
    daysOfMonth = try Self.parse(fields[2], name: "day of month", range: 1...31, names: [:], in: text)
    months = try Self.parse(fields[3], name: "month", range: 1...12, names: Self.monthNames, in: text)
    let weekdays = try Self.parse(fields[4], name: "day of week", range: 0...7, names: Self.dayNames, in: text)
    daysOfWeek = Set(weekdays.map { $0 % 7 })
    dayOfMonthRestricted = !fields[2].hasPrefix("*")
    dayOfWeekRestricted = !fields[4].hasPrefix("*")
  }

  /// Whether the minute starting at `date` (seconds ignored) is one of the expression's.
  public func matches(_ date: Date, in timeZone: TimeZone) -> Bool {
    let parts = Self.calendar(timeZone).dateComponents([.minute, .hour, .day, .month, .weekday], from: date)
    guard let minute = parts.minute, let hour = parts.hour, let day = parts.day, let month = parts.month,
      let weekday = parts.weekday
    else { return false }
    return minutes.contains(minute) && hours.contains(hour) && months.contains(month)
      && dayMatches(day: day, weekday: weekday - 1)
  }

  /// The first minute after `date` that the expression names, in `timeZone`; `nil` if none
  /// comes within 5 years (`0 0 30 2 *`: February has no 30th).
  public func next(after date: Date, in timeZone: TimeZone) -> Date? {
    let calendar = Self.calendar(timeZone)
    // The next whole minute after `date`.
    let start = floor(date.timeIntervalSinceReferenceDate / 60) * 60 + 60
    var candidate = Date(timeIntervalSinceReferenceDate: start)
    guard let end = calendar.date(byAdding: .year, value: 5, to: date) else { return nil }
    while candidate <= end {
      let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .weekday], from: candidate)
      guard let year = parts.year, let month = parts.month, let day = parts.day, let hour = parts.hour,
        let minute = parts.minute, let weekday = parts.weekday
      else { return nil }
      if !months.contains(month) {
        guard let next = calendar.date(from: DateComponents(year: year, month: month + 1, day: 1)) else { return nil }
        candidate = next
      } else if !dayMatches(day: day, weekday: weekday - 1) {
        guard let next = calendar.date(from: DateComponents(year: year, month: month, day: day + 1)) else {
          return nil
        }
        candidate = next
      } else if !hours.contains(hour) {
        guard let next = calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour + 1))
        else { return nil }
        candidate = next
      } else if !minutes.contains(minute) {
        candidate = candidate.addingTimeInterval(60)
      } else {
        return candidate
      }
    }
    return nil
  }

  private func dayMatches(day: Int, weekday: Int) -> Bool {
    let byMonth = daysOfMonth.contains(day)
    let byWeek = daysOfWeek.contains(weekday)
    if dayOfMonthRestricted && dayOfWeekRestricted { return byMonth || byWeek }
    return byMonth && byWeek
  }

  static func calendar(_ timeZone: TimeZone) -> Calendar {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = timeZone
    return calendar
  }

  static let monthNames = [
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11,
    "dec": 12,
  ]
  static let dayNames = ["sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6]

  /// The values of one field: a list of items, each `*`, `v`, `a-b`, optionally `/step`.
  static func parse(
    _ field: String, name: String, range: ClosedRange<Int>, names: [String: Int], in text: String
  ) throws -> Set<Int> {
    func value(_ word: Substring) throws -> Int {
      if let number = Int(word), range.contains(number) { return number }
      if let named = names[word.lowercased()] { return named }
      throw invalid(text, "the \(name) '\(word)' is not in \(range.lowerBound)-\(range.upperBound)")
    }
    var values = Set<Int>()
    for item in field.split(separator: ",", omittingEmptySubsequences: false) {
      let parts = item.split(separator: "/", omittingEmptySubsequences: false)
      guard parts.count <= 2, !parts[0].isEmpty else {
        throw invalid(text, "the \(name) field '\(field)' is malformed")
      }
      var step = 1
      if parts.count == 2 {
        guard let number = Int(parts[1]), number >= 1 else {
          throw invalid(text, "the \(name) step '\(parts[1])' is not a positive number")
        }
        step = number
      }
      let bounds: ClosedRange<Int>
      if parts[0] == "*" {
        bounds = range
      } else if let dash = parts[0].firstIndex(of: "-") {
        let low = try value(parts[0][..<dash])
        let high = try value(parts[0][parts[0].index(after: dash)...])
        guard low <= high else { throw invalid(text, "the \(name) range '\(parts[0])' runs backwards") }
        bounds = low...high
      } else {
        let start = try value(parts[0])
        // `a/n`: from a to the field's end, every n.
        bounds = parts.count == 2 ? start...range.upperBound : start...start
      }
      values.formUnion(stride(from: bounds.lowerBound, through: bounds.upperBound, by: step))
    }
    return values
  }

  static func invalid(_ text: String, _ reason: String) -> RemoteQueueError {
    RemoteQueueError(.invalidConfiguration, message: "cron expression '\(text)': \(reason)")
  }
}
