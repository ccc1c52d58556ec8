import Foundation

/// Files with identical content.
struct DuplicateSet: Sendable {
  /// The size of each file, in bytes.
  let size: Int
  /// The files, in no particular order; at least two.
  let paths: [String]

  /// The bytes that deleting all copies but one would free.
  var reclaimableBytes: Int { size * (paths.count - 1) }
}

/// A file or directory that could not be read, and why. Never fatal: it is left out and listed
/// at the end.
struct SkippedItem: Sendable {
  let path: String
  let reason: String

  init(path: String, reason: String) {
    self.path = path
    self.reason = reason
  }

  init(path: String, error: any Error) {
    self.init(path: path, reason: Self.reason(for: error))
  }

  /// A short reason such as "Permission denied". On Linux, Foundation's `localizedDescription`
  /// starts with a generic "The operation could not be completed."; the POSIX error beneath it,
  /// or else the failure reason, says what happened.
  private static func reason(for error: any Error) -> String {
    if let error = error as? FileReadError {
      return error.description
    }
    let error = error as NSError
    if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError {
      return underlying.localizedDescription
    }
    return error.localizedFailureReason ?? error.localizedDescription
  }
}

/// The counters of a run, for the progress line and the summary.
struct ScanStatistics {
  var directoriesScanned = 0
  var filesScanned = 0
  /// Empty files left out because the minimum size is not 0.
  var emptyFilesIgnored = 0
  /// Non-empty files left out because they are smaller than the minimum size.
  var smallFilesIgnored = 0
  /// Paths left out because they are hard links to a file already found.
  var hardLinksIgnored = 0
  /// Symbolic links, FIFOs, sockets and devices.
  var specialEntriesIgnored = 0
  var filesToHash = 0
  var filesHashed = 0
  var bytesHashed = 0
  var bucketsToCompare = 0
  var bucketsCompared = 0
}

/// Formats `count` bytes for people: "1 byte", "512 bytes", "12.4 KB", "3.0 GB" (powers of 1000).
func formatBytes(_ count: Int) -> String {
  if count < 1000 {
    return count == 1 ? "1 byte" : "\(count) bytes"
  }
  let units = ["KB", "MB", "GB", "TB", "PB"]
  var value = Double(count) / 1000
  var unit = 0
  // 999.95 and up would print as "1000.0".
  while value >= 999.95, unit < units.count - 1 {
    value /= 1000
    unit += 1
  }
  return String(format: "%.1f ", value) + units[unit]
}

/// "1 file", "2 files".
func pluralize(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
  "\(count) \(count == 1 ? singular : plural ?? singular + "s")"
}

/// Writes `text` to standard error, unbuffered.
func writeToStandardError(_ text: String) {
  FileHandle.standardError.write(Data(text.utf8))
}
