import Foundation

/// The outcome of a run: the duplicate sets and a summary on standard output, the skipped items
/// on standard error.
struct Report {
  var duplicateSets: [DuplicateSet]
  var statistics: ScanStatistics
  var skipped: [SkippedItem]
  var minimumSize: Int
  var elapsed: Duration

  /// Writes the report. Standard output is written (unbuffered) before standard error, so the
  /// two stay in order when they go to the same file.
  func write() {
    let sets = duplicateSets.map { DuplicateSet(size: $0.size, paths: $0.paths.sorted()) }
      .sorted { first, second in
        if first.reclaimableBytes != second.reclaimableBytes {
          return first.reclaimableBytes > second.reclaimableBytes
        }
        if first.size != second.size {
          return first.size > second.size
        }
        return first.paths[0] < second.paths[0]
      }
    var output = ""
    for set in sets {
      output += "\(set.paths.count) files, \(formatBytes(set.size)) each:\n"
      for path in set.paths {
        output += "  \(path)\n"
      }
      output += "\n"
    }
    output += summary(sets) + "\n"
    for note in notes() {
      output += note + "\n"
    }
    FileHandle.standardOutput.write(Data(output.utf8))
    writeSkipped()
  }

  private func summary(_ sets: [DuplicateSet]) -> String {
    let reclaimable = sets.reduce(0) { $0 + $1.reclaimableBytes }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return "Scanned \(pluralize(statistics.filesScanned, "file"))"
      + " in \(pluralize(statistics.directoriesScanned, "directory", "directories")),"
      + " hashed \(formatBytes(statistics.bytesHashed)),"
      + " found \(pluralize(sets.count, "duplicate set"))"
      + " (\(formatBytes(reclaimable)) reclaimable) in \(String(format: "%.2f", seconds)) s."
  }

  /// Says which files were left out, and why.
  private func notes() -> [String] {
    var notes: [String] = []
    if statistics.emptyFilesIgnored > 0 {
      notes.append(
        "Ignored \(pluralize(statistics.emptyFilesIgnored, "empty file"))"
          + " (--min-size 0 lists them as one set).")
    }
    if statistics.smallFilesIgnored > 0 {
      notes.append(
        "Ignored \(pluralize(statistics.smallFilesIgnored, "file")) smaller than"
          + " \(formatBytes(minimumSize)) (--min-size).")
    }
    if statistics.hardLinksIgnored > 0 {
      notes.append(
        "Ignored \(pluralize(statistics.hardLinksIgnored, "hard link"))"
          + " to files already found (they share storage, so deleting them frees nothing).")
    }
    if statistics.specialEntriesIgnored > 0 {
      let count = pluralize(
        statistics.specialEntriesIgnored, "symbolic link or special file",
        "symbolic links and special files")
      notes.append("Ignored \(count).")
    }
    return notes
  }

  private func writeSkipped() {
    guard !skipped.isEmpty else { return }
    var text = "Skipped \(pluralize(skipped.count, "unreadable item")):\n"
    for item in skipped.sorted(by: { $0.path < $1.path }) {
      text += "  \(item.path): \(item.reason)\n"
    }
    writeToStandardError(text)
  }
}
