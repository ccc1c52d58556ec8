import Foundation
import JobKit

/// Finds the files with identical content under a directory, as a workflow that decides its next
/// step from what the previous one found:
///
/// 1. **Scan.** One ``ScanDirectory`` task per directory; each finished scan tracks a scan per
///    subdirectory and records its files by size.
/// 2. **Hash.** When the last scan is done: one ``HashFile`` task per file whose size is shared
///    by another file (a file with a unique size has no duplicate).
/// 3. **Confirm.** When the last hash is done: one ``ConfirmDuplicates`` task per group of two
///    or more files with the same size and hash, comparing them byte by byte in parallel.
/// 4. **Report.** When every task is done, ``allTasksFinished()`` prints the ``Report``.
///
/// Unreadable files and directories are skipped and listed in the report: a scan or hash task
/// that cannot read its path finishes with an error, which the job's ``failures`` list keeps
/// (named by the path); the job itself never fails (its failure policy is the default,
/// `.ignore`). At most two hashing tasks read the disk at once (a per-group limit), and the
/// progress line shows the job's rolled-up ``progress``.
final class FindDuplicatesJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the mutable state below is only touched from main() and the job's
  // callbacks, which JobKit runs one at a time.

  let root: String
  let minimumSize: Int

  private var startTime = ContinuousClock.now
  private var statistics = ScanStatistics()
  private var progressLine = ProgressLine()
  private var skipped: [SkippedItem] = []
  /// Scan results: the candidate files, by size.
  private var filesBySize: [Int: [ScannedFile]] = [:]
  /// The files found so far, to recognize hard links to them.
  private var fileIDs: Set<FileID> = []
  /// Hash results: the paths of the hashed files, by size and hash.
  private var pathsByContent: [ContentKey: [String]] = [:]
  private var duplicateSets: [DuplicateSet] = []

  private struct ContentKey: Hashable {
    let size: Int
    let hash: UInt64
  }

  /// Creates a job that searches `root`, ignoring files smaller than `minimumSize` bytes.
  init(root: String, minimumSize: Int) {
    self.root = root
    self.minimumSize = minimumSize
    // The tasks read the disk more than they compute: a few more than one per core keeps the
    // disk busy without thrashing it.
    let queue = OperationQueue()
    queue.name = "find-duplicates.tasks"
    queue.maxConcurrentOperationCount = ProcessInfo.processInfo.activeProcessorCount * 2
    super.init(taskQueue: queue)
  }

  override func main() {
    startTime = .now
    // The scan group fires when the last unfinished ScanDirectory has been routed. A scan's own
    // completion (`scanned`) tracks the scans of its subdirectories before JobKit counts that
    // scan as done, so the group cannot reach zero while a directory is still to be listed: it
    // fires exactly once, after the whole tree was scanned.
    setCompletion(forGroup: ScanDirectory.self) { self.hashCandidates() }
    setCompletion(forGroup: HashFile.self) { self.confirmCandidates() }
    // Hashing reads whole files: two readers keep a disk busy, more make it seek. Scans and
    // comparisons are not limited.
    setMaxConcurrentTasks(2, forGroup: HashFile.self)
    // No handler for the ConfirmDuplicates group: the report is printed by allTasksFinished(),
    // which also runs when there was nothing to hash or to confirm (then those groups never
    // fire).
    scan(root)
  }

  // MARK: - Scan

  private func scan(_ directory: String) {
    trackAndQueue(ScanDirectory(directory: directory)) { self.scanned($0) }
  }

  private func scanned(_ task: ScanDirectory) {
    guard task.error == nil else { return }  // listed in `failures`, reported at the end
    statistics.directoriesScanned += 1
    for subdirectory in task.subdirectories {
      scan(subdirectory)
    }
    skipped += task.unreadableEntries
    statistics.specialEntriesIgnored += task.ignoredEntries
    for file in task.files {
      statistics.filesScanned += 1
      if !fileIDs.insert(file.id).inserted {
        statistics.hardLinksIgnored += 1
      } else if file.size >= minimumSize {
        filesBySize[file.size, default: []].append(file)
      } else if file.size == 0 {
        statistics.emptyFilesIgnored += 1
      } else {
        statistics.smallFilesIgnored += 1
      }
    }
    showProgress()
  }

  // MARK: - Hash

  /// The scan group finished: hash every file whose size is shared by another file.
  private func hashCandidates() {
    let candidates = filesBySize.filter { $0.value.count >= 2 }
    filesBySize = [:]
    fileIDs = []
    // Largest first, so that the longest tasks do not start last and leave the queue idle.
    for (size, files) in candidates.sorted(by: { $0.key > $1.key }) {
      guard size > 0 else {
        // Empty files (only with --min-size 0) are trivially equal: one set, nothing to read.
        duplicateSets.append(DuplicateSet(size: 0, paths: files.map(\.path)))
        continue
      }
      for file in files {
        statistics.filesToHash += 1
        trackAndQueue(HashFile(file: file)) { self.hashed($0) }
      }
    }
    showProgress()
  }

  private func hashed(_ task: HashFile) {
    statistics.filesHashed += 1
    statistics.bytesHashed += task.bytesHashed
    // A task that failed is listed in `failures` and reported at the end.
    if task.error == nil, let hash = task.contentHash {
      pathsByContent[ContentKey(size: task.file.size, hash: hash), default: []]
        .append(task.file.path)
    }
    showProgress()
  }

  // MARK: - Confirm

  /// The hash group finished: compare the files of every size-and-hash bucket byte by byte.
  private func confirmCandidates() {
    let buckets = pathsByContent.filter { $0.value.count >= 2 }
    pathsByContent = [:]
    for (key, paths) in buckets.sorted(by: { $0.key.size > $1.key.size }) {
      statistics.bucketsToCompare += 1
      trackAndQueue(ConfirmDuplicates(size: key.size, candidates: paths)) { self.confirmed($0) }
    }
    showProgress()
  }

  private func confirmed(_ task: ConfirmDuplicates) {
    statistics.bucketsCompared += 1
    duplicateSets += task.duplicateSets
    skipped += task.unreadableFiles
    showProgress()
  }

  // MARK: - Report

  override func allTasksFinished() {
    progressLine.clear()
    // The tasks that failed are the paths that could not be read; their task name is the path.
    let unreadable = failures.map { SkippedItem(path: $0.taskName, error: $0.error) }
    Report(
      duplicateSets: duplicateSets,
      statistics: statistics,
      skipped: unreadable + skipped,
      minimumSize: minimumSize,
      elapsed: .now - startTime
    ).write()
  }

  private func showProgress() {
    progressLine.update(progressText())
  }

  /// The progress so far, short enough for an 80-column terminal. The percentage is the job's
  /// rolled-up progress: routed tasks out of those tracked so far, so it can fall back when a
  /// step discovers more work.
  private func progressText() -> String {
    var text =
      String(format: "%3.0f%% ", fractionCompleted * 100)
      + "scanned \(statistics.filesScanned) files in \(statistics.directoriesScanned) dirs"
    if statistics.bucketsToCompare > 0 {
      text +=
        ", hashed \(formatBytes(statistics.bytesHashed)),"
        + " compared \(statistics.bucketsCompared)/\(statistics.bucketsToCompare) sets"
    } else if statistics.filesToHash > 0 {
      text +=
        ", hashed \(formatBytes(statistics.bytesHashed))"
        + " (\(statistics.filesHashed)/\(statistics.filesToHash) files)"
    }
    return text + "…"
  }
}
