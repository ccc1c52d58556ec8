/// Files with identical content.
public struct DuplicateSet: Sendable, Equatable {
  /// The size of each file, in bytes.
  public var size: Int64
  /// The paths, sorted byte by byte; at least two.
  public var paths: [[UInt8]]
  /// How many distinct files (inodes) the paths name: fewer than `paths.count` when hard links
  /// are listed.
  public var distinctFiles: Int

  /// The bytes that deleting all copies but one would free.
  public var reclaimableBytes: Int64 { size * Int64(distinctFiles - 1) }

  /// Whether `self` is reported before `other`: largest waste first, then largest files, then
  /// by first path.
  func precedes(_ other: DuplicateSet) -> Bool {
    if reclaimableBytes != other.reclaimableBytes { return reclaimableBytes > other.reclaimableBytes }
    if size != other.size { return size > other.size }
    return PathOrder.precedes(paths[0], other.paths[0])
  }
}

/// A file or directory that was left out because it could not be read or changed during the
/// search, and why.
public struct SkippedItem: Sendable, Equatable {
  /// The raw path.
  public var path: [UInt8]
  /// Why it was skipped, e.g. "Permission denied" or "changed during the search".
  public var reason: String
  /// Whether the file was left out because it changed during the search (it was readable).
  public var changed: Bool

  /// An item skipped for `reason`.
  public init(path: [UInt8], reason: String, changed: Bool = false) {
    self.path = path
    self.reason = reason
    self.changed = changed
  }
}

/// The counters of a run, for the summary.
public struct ScanStatistics: Sendable, Equatable {
  /// Directories listed.
  public var directoriesScanned = 0
  /// Regular files found, counting each path of a hard-linked file.
  public var filesScanned = 0
  /// Empty files left out because the minimum size is not 0.
  public var emptyFilesIgnored = 0
  /// Non-empty files left out because they are smaller than the minimum size.
  public var smallFilesIgnored = 0
  /// Paths of candidate files that are further hard links of a file already counted.
  public var hardLinks = 0
  /// Symbolic links (when not followed), FIFOs, sockets and devices.
  public var specialEntriesIgnored = 0
  /// Directories reached a second time (through a link, a bind mount or overlapping arguments).
  public var directoriesRevisited = 0
  /// Bytes read from files, by every step.
  public var bytesRead: Int64 = 0

  /// All counters at zero.
  public init() {}
}

/// The outcome of a search.
public struct DuplicateReport: Sendable {
  /// The sets, in report order (see ``DuplicateSet``).
  public var sets: [DuplicateSet]
  /// What was left out, sorted by path.
  public var skipped: [SkippedItem]
  /// The counters of the run.
  public var statistics: ScanStatistics
  /// The minimum size the search used.
  public var minimumSize: Int64
  /// Whether the sets list every hard link.
  public var listsHardLinks: Bool
  /// How long the search took.
  public var elapsed: Duration

  /// The bytes that deleting all copies but one in each set would free.
  public var reclaimableBytes: Int64 { sets.reduce(0) { $0 + $1.reclaimableBytes } }
}
