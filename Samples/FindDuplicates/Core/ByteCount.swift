import Foundation

/// Formats `count` bytes for people: "1 byte", "512 bytes", "12.4 KB", "3.0 GB" (powers of
/// 1000, as `ls --si` and `du --si` do).
public func formatBytes(_ count: Int64) -> String {
  if count < 1000 {
    return count == 1 ? "1 byte" : "\(count) bytes"
  }
  let units = ["KB", "MB", "GB", "TB", "PB", "EB"]
  // Tenths of the unit, rounded half up, in integers (no String(format:), no locale).
  var unit = 0
  var divisor: Int64 = 1000
  while unit < units.count - 1, (count + divisor / 20) / divisor >= 1000 {
    unit += 1
    divisor *= 1000
  }
  let tenths = (count * 10 + divisor / 2) / divisor
  return "\(tenths / 10).\(tenths % 10) \(units[unit])"
}

/// "1 file", "2 files".
public func pluralize(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
  "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
}

/// Parses a size such as `100`, `4k`, `1.5M`, `2GiB`, `10KB`: a number of bytes, optionally
/// followed by a unit. `k`, `M`, `G`, `T` (either case, optionally followed by `B` or `iB`) are
/// powers of 1024, as in jdupes, fdupes, rmlint and `find -size`. `B` alone means bytes.
/// Returns `nil` for anything else, or a negative or overflowing value.
public func parseByteCount(_ text: String) -> Int64? {
  let trimmed = text.trimmingCharacters(in: .whitespaces)
  guard let numberEnd = trimmed.firstIndex(where: { !($0.isASCII && ($0.isNumber || $0 == ".")) }) else {
    return Int64(trimmed)
  }
  let number = trimmed[..<numberEnd]
  var unit = trimmed[numberEnd...].lowercased()
  if unit.hasSuffix("ib") {
    unit.removeLast(2)
  } else if unit.hasSuffix("b") {
    unit.removeLast()
  }
  let exponents: [String: Int] = ["": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5]
  guard let exponent = exponents[unit], !number.isEmpty else { return nil }
  var multiplier: Int64 = 1
  for _ in 0..<exponent { multiplier *= 1024 }
  if let whole = Int64(number) {
    let (product, overflow) = whole.multipliedReportingOverflow(by: multiplier)
    return overflow ? nil : product
  }
  guard let value = Double(number), value >= 0, value * Double(multiplier) < 9.2e18 else { return nil }
  return Int64((value * Double(multiplier)).rounded(.up))
}
