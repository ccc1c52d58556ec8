import Foundation

/// Turns a ``DuplicateReport`` into the bytes of each output format.
public enum ReportWriter {
  /// What goes to standard output for `format`.
  public static func standardOutput(_ report: DuplicateReport, format: Options.OutputFormat) -> [UInt8] {
    Array(records(report, format: format).joined())
  }

  /// What goes to standard output for `format`, as the records it may end at when interrupted
  /// (see ``ReportOutput``): in text, each set with its blank line, then the summary and notes;
  /// with `-0`, each set with its extra NUL; in JSON, the whole document.
  public static func records(_ report: DuplicateReport, format: Options.OutputFormat) -> [[UInt8]] {
    switch format {
    case .text:
      var records = report.sets.map { text([$0]) }
      var ending = Array((summary(report) + "\n").utf8)
      for note in notes(report) { ending += Array((note + "\n").utf8) }
      records.append(ending)
      return records
    case .nulSeparated:
      return report.sets.map { nulSeparated([$0]) }
    case .json:
      return [Array(json(report).utf8)]
    }
  }

  /// What goes to standard error for `format`: the skipped items, and the summary when standard
  /// output holds only data.
  public static func standardError(_ report: DuplicateReport, format: Options.OutputFormat) -> String {
    var output = ""
    if format == .nulSeparated {
      output += summary(report) + "\n"
      for note in notes(report) { output += note + "\n" }
    }
    if !report.skipped.isEmpty {
      let changed = report.skipped.filter(\.changed).count
      if changed == 0 {
        output += "Skipped \(pluralize(report.skipped.count, "unreadable item")):\n"
      } else if changed == report.skipped.count {
        output += "Skipped \(pluralize(changed, "file")) that changed during the search:\n"
      } else {
        output += "Skipped \(pluralize(report.skipped.count, "item")) (\(report.skipped.count - changed) unreadable,"
        output += " \(changed) changed during the search):\n"
      }
      for item in report.skipped {
        output += "  \(PathEscaping.escapedForTerminal(item.path)): \(item.reason)\n"
      }
    }
    return output
  }

  /// "2 files, 12.4 KB each:", then each path indented and escaped, then a blank line.
  public static func text(_ sets: [DuplicateSet]) -> [UInt8] {
    var output: [UInt8] = []
    for set in sets {
      output += "\(set.paths.count) files, \(formatBytes(set.size)) each:\n".utf8
      for path in set.paths {
        output += "  ".utf8
        // Most names need no escaping: their bytes go out as they are, with no String made.
        if path.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) {
          output += path
        } else {
          output += PathEscaping.escapedForTerminal(path).utf8
        }
        output.append(UInt8(ascii: "\n"))
      }
      output.append(UInt8(ascii: "\n"))
    }
    return output
  }

  /// Each path's raw bytes followed by a NUL, and an extra NUL after each set.
  public static func nulSeparated(_ sets: [DuplicateSet]) -> [UInt8] {
    var output: [UInt8] = []
    for set in sets {
      for path in set.paths {
        output += path
        output.append(0)
      }
      output.append(0)
    }
    return output
  }

  /// `{"sets":[…],"skipped":[…],"summary":{…}}`, one set per line.
  public static func json(_ report: DuplicateReport) -> String {
    var output = "{\"sets\":["
    for (index, set) in report.sets.enumerated() {
      output += index == 0 ? "\n" : ",\n"
      output += "{\"size\":\(set.size),\"reclaimable\":\(set.reclaimableBytes),\"files\":["
      output += set.paths.map { "{" + PathEscaping.jsonFields($0) + "}" }.joined(separator: ",")
      output += "]}"
    }
    output += "\n],\"skipped\":["
    for (index, item) in report.skipped.enumerated() {
      output += index == 0 ? "\n" : ",\n"
      output += "{" + PathEscaping.jsonFields(item.path) + ",\"reason\":" + PathEscaping.jsonString(item.reason)
      output += item.changed ? ",\"changed\":true}" : "}"
    }
    let statistics = report.statistics
    output += "\n],\"summary\":{"
    output += "\"files_scanned\":\(statistics.filesScanned),\"directories_scanned\":\(statistics.directoriesScanned),"
    output += "\"bytes_read\":\(statistics.bytesRead),\"sets\":\(report.sets.count),"
    output += "\"reclaimable\":\(report.reclaimableBytes),\"seconds\":\(seconds(report.elapsed))}}\n"
    return output
  }

  /// The one-line summary.
  public static func summary(_ report: DuplicateReport) -> String {
    let statistics = report.statistics
    return "Scanned \(pluralize(statistics.filesScanned, "file"))"
      + " in \(pluralize(statistics.directoriesScanned, "directory", "directories")),"
      + " read \(formatBytes(statistics.bytesRead)),"
      + " found \(pluralize(report.sets.count, "duplicate set"))"
      + " (\(formatBytes(report.reclaimableBytes)) reclaimable) in \(seconds(report.elapsed)) s."
  }

  /// Which files were left out, and why.
  public static func notes(_ report: DuplicateReport) -> [String] {
    let statistics = report.statistics
    var notes: [String] = []
    if statistics.emptyFilesIgnored > 0 {
      notes.append(
        "Ignored \(pluralize(statistics.emptyFilesIgnored, "empty file")) (--min-size 0 lists them as one set).")
    }
    if statistics.smallFilesIgnored > 0 {
      notes.append(
        "Ignored \(pluralize(statistics.smallFilesIgnored, "file")) smaller than"
          + " \(formatBytes(report.minimumSize)) (--min-size).")
    }
    if statistics.hardLinks > 0 {
      notes.append(
        report.listsHardLinks
          ? "Listed \(pluralize(statistics.hardLinks, "extra hard link")) of files (they free no space)."
          : "Showed each hard-linked file once, under its first path; \(pluralize(statistics.hardLinks, "other link"))"
            + " not shown (-H lists them).")
    }
    if statistics.specialEntriesIgnored > 0 {
      let count = pluralize(
        statistics.specialEntriesIgnored, "symbolic link or special file", "symbolic links and special files")
      notes.append("Ignored \(count).")
    }
    if statistics.directoriesRevisited > 0 {
      notes.append(
        "Visited \(pluralize(statistics.directoriesRevisited, "directory", "directories")) reached twice only once.")
    }
    return notes
  }

  private static func seconds(_ duration: Duration) -> String {
    let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    let hundredths = (milliseconds + 5) / 10
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
  }
}
