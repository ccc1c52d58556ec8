import Foundation
import Glibc
import JobKit

/// Finds the files with identical content under some directories, as a JobKit job that decides
/// each next step from what the previous one found:
///
/// 1. **Scan.** One ``ScanDirectory`` task per directory, on raw name bytes; each finished scan
///    tracks the scans of its subdirectories (each directory once, by device and inode) and
///    adds its regular files to one compact list (paths in a ``PathArena``).
/// 2. **First blocks.** When the last scan is done: files are grouped by size, the paths of one
///    file (device and inode: hard links, or one name reached twice) are folded into one (its
///    path that sorts first represents it; with -H its other names, ``NameIdentity``, are listed
///    with it), and a size shared by
///    several files needs a closer look. Pairs of files up to 64 MiB go straight to step 4 (the
///    comparison reads each once and stops at the first difference); larger groups get the hash
///    of their first 16 KiB (``HashFirstBlocks``, a batch of files per task).
/// 3. **Hash.** Groups of three or more files larger than 16 KiB whose first blocks agree get the
///    hash of the rest (``HashRanges``, 64 MiB pieces, so that large files are hashed in
///    parallel).
/// 4. **Compare.** Files whose size and hashes agree are compared byte by byte
///    (``CompareRanges``), in 64 MiB ranges: a set is reported only if its files are identical.
///    Each file found equal is then checked with `fstat` on the descriptor its bytes came from:
///    one whose ``FileStamp`` (device, inode, size, mtime, ctime) is no longer the one the scan
///    listed changed during the search, and is reported as such and left out.
/// 5. **Report.** ``allTasksFinished()`` builds the ``report``.
///
/// Each step is set up in the group callback of the previous one, and never after a cancel: a
/// callback that was already on its way when the job was cancelled returns at once. Reading
/// tasks check for cancellation between files and between reads of at most 256 KiB. Unreadable
/// files and directories are skipped and listed in the report, with the system's reason. At
/// most one reading task per core runs at once (a per-group limit): with a warm cache reading is
/// CPU work, and on a disk more readers would make it seek.
public final class FindDuplicatesJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the mutable state below is only touched from main() and the job's
  // callbacks, which JobKit runs one at a time; `report` is read after the job finished.

  /// What to search, and how.
  public struct Configuration: Sendable {
    /// The directories and files to search, as raw path bytes.
    public var roots: [[UInt8]]
    /// Smaller files are not compared.
    public var minimumSize: Int64
    /// Follow symbolic links to files and directories.
    public var followSymlinks: Bool
    /// List every hard link (see ``Options/listHardLinks``).
    public var listHardLinks: Bool
    /// How many reading tasks may run at once; default, one per core.
    public var readers = max(1, ProcessInfo.processInfo.activeProcessorCount)
    /// Moments where tests act (none by default).
    public var hooks = SearchHooks()

    /// A configuration; only `roots` has no default.
    public init(roots: [[UInt8]], minimumSize: Int64 = 1, followSymlinks: Bool = false, listHardLinks: Bool = false) {
      self.roots = roots
      self.minimumSize = minimumSize
      self.followSymlinks = followSymlinks
      self.listHardLinks = listHardLinks
    }

    /// The configuration `options` ask for.
    public init(_ options: Options) {
      self.init(
        roots: options.roots, minimumSize: options.minimumSize, followSymlinks: options.followSymlinks,
        listHardLinks: options.listHardLinks)
    }
  }

  /// Files compared or hashed in one piece at most this large; larger ones are split so that
  /// their pieces run in parallel.
  static let rangeSize: Int64 = 64 * 1024 * 1024

  /// What the job searches.
  public let configuration: Configuration
  /// How far the search has come; tasks update it as they read.
  public let status: ProgressStatus
  /// The result, once the job finished without being cancelled.
  public private(set) var report: DuplicateReport?

  private var readers: Int { configuration.readers }
  private var startTime = ContinuousClock.now
  private var statistics = ScanStatistics()
  private var skipped: [SkippedItem] = []
  private var failedFiles: Set<UInt32> = []

  // Scan.
  private var arena = PathArena()
  private var files: [FileRecord] = []
  private var visitedDirectories: Set<FileID> = []
  /// Directories found but not yet queued for a scan, last found first (depth first keeps this
  /// short). Only a few scans are queued at once: thousands of queued operations would cost
  /// more memory than their paths.
  private var directoriesToScan: [[UInt8]] = []
  private var scansInFlight = 0
  private lazy var maxScansInFlight = readers * 16

  // After the scan.
  private var catalog = FileCatalog(arena: PathArena(), files: [])
  /// For a file with several paths: its representative (first path) → how many paths follow
  /// it in `catalog.files`, itself included.
  private var linkCounts: [UInt32: UInt32] = [:]
  /// For a file with several paths, once asked for: the catalog indices of its different names
  /// (see ``names(of:)``).
  private var linkNames: [UInt32: [UInt32]] = [:]
  /// Groups of representatives to compare, each of one size, and the labels of their units.
  private var compareGroups: [[UInt32]] = []
  private var compareLabels: [[[Int32]]] = []
  /// Groups to hash fully: representatives, and their units' hashes.
  private var hashGroups: [(members: [UInt32], firstUnit: Int, unitsPerFile: Int)] = []
  private var unitHashes: [UInt64] = []
  /// Sets found without reading (empty files, hard links of one file with -H), as members.
  private var directSets: [[UInt32]] = []

  /// A job that searches as `configuration` says, reporting to `status`.
  public init(configuration: Configuration, status: ProgressStatus = ProgressStatus()) {
    self.configuration = configuration
    self.status = status
    let queue = OperationQueue()
    queue.name = "find-duplicates.tasks"
    // Scans are system calls more than anything: one more than the cores keeps them busy.
    queue.maxConcurrentOperationCount = configuration.readers + 1
    super.init(taskQueue: queue)
  }

  public override func main() {
    startTime = .now
    setCompletion(forGroup: ScanDirectory.self) { self.scanFinished() }
    setCompletion(forGroup: HashFirstBlocks.self) { self.firstBlocksFinished() }
    setCompletion(forGroup: HashRanges.self) { self.hashingFinished() }
    var scans = 0
    for root in configuration.roots {
      var status = stat()
      let result = root.withUnsafeBufferPointer { bytes in
        var path = Array(bytes)
        path.append(0)
        return path.withUnsafeBufferPointer {
          stat(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), &status)
        }
      }
      guard result == 0 else {
        skip(root, ReadFailure(errno: errno))
        continue
      }
      switch status.st_mode & S_IFMT {
      case S_IFDIR:
        if visitedDirectories.insert(FileID(status)).inserted {
          scan(root)
          scans += 1
        } else {
          statistics.directoriesRevisited += 1
        }
      case S_IFREG:
        statistics.filesScanned += 1
        addFile(FileStamp(status)) { $0.append(path: root) }
      default:
        statistics.specialEntriesIgnored += 1
      }
    }
    if scans == 0 {
      scanFinished()
    } else {
      startScans()
    }
  }

  // MARK: - Scan

  private func scan(_ directory: [UInt8]) {
    directoriesToScan.append(directory)
  }

  /// Queues scans of the directories found, up to `maxScansInFlight` at once.
  private func startScans() {
    while scansInFlight < maxScansInFlight, !isCancelled, let directory = directoriesToScan.popLast() {
      scansInFlight += 1
      trackAndQueue(ScanDirectory(directory: directory, followSymlinks: configuration.followSymlinks)) {
        self.scanned($0)
      }
    }
  }

  private func scanned(_ task: ScanDirectory) {
    scansInFlight -= 1
    configuration.hooks.afterScanningDirectory?(task.directory)
    defer { startScans() }
    if let failure = task.error as? ReadFailure {
      skip(task.directory, failure)
      return
    }
    guard !task.isCancelled else { return }
    statistics.directoriesScanned += 1
    statistics.specialEntriesIgnored += task.ignoredEntries
    var filesFound = 0
    task.names.withUnsafeBytes { names in
      for entry in task.entries {
        let name = UnsafeRawBufferPointer(
          rebasing: names[Int(entry.nameStart)..<Int(entry.nameStart + entry.nameLength)])
        switch entry.kind {
        case .directory:
          if visitedDirectories.insert(entry.stamp.id).inserted {
            var path = task.directory
            if path.last != UInt8(ascii: "/") { path.append(UInt8(ascii: "/")) }
            path.append(contentsOf: name)
            scan(path)
          } else {
            statistics.directoriesRevisited += 1
          }
        case .file:
          filesFound += 1
          addFile(entry.stamp) { $0.append(directory: task.directory, name: name) }
        }
      }
      for failure in task.failures {
        var path = task.directory
        if path.last != UInt8(ascii: "/") { path.append(UInt8(ascii: "/")) }
        path.append(contentsOf: names[Int(failure.nameStart)..<Int(failure.nameStart + failure.nameLength)])
        skip(path, failure.failure)
      }
    }
    statistics.filesScanned += filesFound
    status.scanned(files: filesFound, directories: 1)
  }

  private func addFile(_ stamp: FileStamp, path: (inout PathArena) -> (offset: UInt32, length: UInt32)) {
    guard stamp.size >= configuration.minimumSize else {
      if stamp.size == 0 { statistics.emptyFilesIgnored += 1 } else { statistics.smallFilesIgnored += 1 }
      return
    }
    let (offset, length) = path(&arena)
    files.append(FileRecord(pathOffset: offset, pathLength: length, stamp: stamp))
  }

  // MARK: - Group by size

  /// The scan group finished: fold hard links, group by size, and start reading.
  private func scanFinished() {
    guard !isCancelled else { return }
    var files = self.files
    self.files = []
    let arena = self.arena
    self.arena = PathArena()
    arena.bytes.withUnsafeBufferPointer { bytes in
      files.sort { first, second in
        if first.size != second.size { return first.size > second.size }
        if first.id.device != second.id.device { return first.id.device < second.id.device }
        if first.id.inode != second.id.inode { return first.id.inode < second.id.inode }
        let raw = UnsafeRawBufferPointer(bytes)
        return PathOrder.precedes(
          UnsafeRawBufferPointer(rebasing: raw[Int(first.pathOffset)..<Int(first.pathOffset + first.pathLength)]),
          UnsafeRawBufferPointer(rebasing: raw[Int(second.pathOffset)..<Int(second.pathOffset + second.pathLength)]))
      }
    }
    catalog = FileCatalog(arena: arena, files: files)
    files = []
    guard !isCancelled else { return }

    var firstBlockCandidates: [UInt32] = []
    var sizeStart = 0
    let all = catalog.files
    while sizeStart < all.count {
      let size = all[sizeStart].size
      var sizeEnd = sizeStart + 1
      while sizeEnd < all.count, all[sizeEnd].size == size { sizeEnd += 1 }
      defer { sizeStart = sizeEnd }
      if sizeEnd - sizeStart < 2 { continue }
      var members: [UInt32] = []
      var paths = 0
      var start = sizeStart
      while start < sizeEnd {
        var end = start + 1
        while end < sizeEnd, all[end].id == all[start].id { end += 1 }
        members.append(UInt32(start))
        if end - start > 1 {
          linkCounts[UInt32(start)] = UInt32(end - start)
          // Only -H needs to know now whether the paths are different names.
          paths += configuration.listHardLinks ? names(of: UInt32(start)).count : 1
        } else {
          paths += 1
        }
        start = end
      }
      if members.count == 1 || size == 0 {
        if members.count >= 2 || (configuration.listHardLinks && paths >= 2) { directSets.append(members) }
      } else if members.count == 2, size <= Self.rangeSize {
        compareGroups.append(members)
      } else {
        firstBlockCandidates += members
      }
    }
    guard !firstBlockCandidates.isEmpty else {
      firstBlocksFinished()
      return
    }
    status.begin(.firstBlocks, total: Int64(firstBlockCandidates.count))
    // Each phase limits its readers when it starts: a limit for a phase that never runs would be
    // reported as never used.
    setMaxConcurrentTasks(readers, forGroup: HashFirstBlocks.self)
    let batchSize = max(1, min(256, firstBlockCandidates.count / (readers * 8)))
    var start = 0
    while start < firstBlockCandidates.count {
      let batch = Array(firstBlockCandidates[start..<min(start + batchSize, firstBlockCandidates.count)])
      start += batch.count
      trackAndQueue(HashFirstBlocks(catalog: catalog, files: batch, status: status)) { self.firstBlocksHashed($0) }
    }
  }

  /// The catalog indices of the different names of file `member` (a representative): its first
  /// path, and each further path that is another hard link, not the same name spelled
  /// differently (``NameIdentity``: `X` and `./X`, a directory given twice, a symbolic link to
  /// the file followed with -L). Looked up once per file, only for files with several paths.
  private func names(of member: UInt32) -> [UInt32] {
    guard let count = linkCounts[member] else { return [member] }
    if let known = linkNames[member] { return known }
    var result: [UInt32] = [member]
    var seen: Set<NameIdentity> = []
    if let identity = NameIdentity(path: catalog.path(Int(member))) { seen.insert(identity) }
    for index in Int(member) + 1..<Int(member + count) where catalog.path(index) != catalog.path(index - 1) {
      // A path that no longer names anything counts as a name of its own: it was one when listed.
      guard let identity = NameIdentity(path: catalog.path(index)) else {
        result.append(UInt32(index))
        continue
      }
      if seen.insert(identity).inserted { result.append(UInt32(index)) }
    }
    linkNames[member] = result
    return result
  }

  // MARK: - First blocks

  private var firstBlockResults: [(size: Int64, hash: UInt64, file: UInt32)] = []

  private func firstBlocksHashed(_ task: HashFirstBlocks) {
    statistics.bytesRead += task.bytesRead
    var failed = Set<Int>()
    for (position, failure) in task.failures {
      failed.insert(position)
      skipFile(task.files[position], failure)
    }
    for (position, hash) in task.hashes.enumerated() where !failed.contains(position) {
      let file = task.files[position]
      firstBlockResults.append((catalog.files[Int(file)].size, hash, file))
    }
  }

  /// The first blocks are hashed: compare small files and pairs, hash the rest of larger groups.
  private func firstBlocksFinished() {
    guard !isCancelled else { return }
    var results = firstBlockResults
    firstBlockResults = []
    results.sort { $0.size != $1.size ? $0.size > $1.size : $0.hash != $1.hash ? $0.hash < $1.hash : $0.file < $1.file }
    var units: [HashUnit] = []
    var start = 0
    let blockSize = Int64(HashFirstBlocks.blockSize)
    while start < results.count {
      var end = start + 1
      while end < results.count, results[end].size == results[start].size, results[end].hash == results[start].hash {
        end += 1
      }
      defer { start = end }
      guard end - start >= 2 else { continue }
      let members = results[start..<end].map(\.file)
      let size = results[start].size
      if size <= blockSize || members.count == 2 {
        compareGroups.append(members)
        continue
      }
      let unitsPerFile = Int((size - blockSize + Self.rangeSize - 1) / Self.rangeSize)
      hashGroups.append((members, units.count, unitsPerFile))
      for member in members {
        var offset = blockSize
        while offset < size {
          let length = min(Self.rangeSize, size - offset)
          units.append(HashUnit(file: member, offset: offset, length: length))
          offset += length
        }
      }
    }
    guard !units.isEmpty else {
      startComparing()
      return
    }
    unitHashes = [UInt64](repeating: 0, count: units.count)
    let total = units.reduce(0) { $0 + $1.length }
    status.begin(.hashing, total: total)
    setMaxConcurrentTasks(readers, forGroup: HashRanges.self)
    queue(units, total: total) { batch, firstUnit in
      trackAndQueue(HashRanges(catalog: catalog, units: batch, status: status)) { self.rangesHashed($0, firstUnit) }
    }
  }

  /// Splits `units` into batches of about `total / (readers * 8)` bytes (at most 64 MiB, at
  /// most 256 units) and calls `body` with each and the index of its first unit.
  private func queue<Unit>(
    _ units: [Unit], total: Int64, length: (Unit) -> Int64 = { _ in 0 }, _ body: ([Unit], Int) -> Void
  ) {
    let target = max(1 << 20, min(Self.rangeSize, total / Int64(readers * 8)))
    var start = 0
    while start < units.count {
      var end = start
      var bytes: Int64 = 0
      while end < units.count, end - start < 256, bytes < target {
        bytes += max(length(units[end]), 4096)
        end += 1
      }
      body(Array(units[start..<end]), start)
      start = end
    }
  }

  private func rangesHashed(_ task: HashRanges, _ firstUnit: Int) {
    statistics.bytesRead += task.bytesRead
    for (position, hash) in task.hashes.enumerated() {
      unitHashes[firstUnit + position] = hash
    }
    for (position, failure) in task.failures {
      skipFile(task.units[position].file, failure)
    }
  }

  /// The rest of the larger groups is hashed: compare the files whose hashes agree.
  private func hashingFinished() {
    guard !isCancelled else { return }
    for group in hashGroups {
      var byHash: [UInt64: [UInt32]] = [:]
      for (index, member) in group.members.enumerated() where !failedFiles.contains(member) {
        let first = group.firstUnit + index * group.unitsPerFile
        let key = unitHashes[first..<first + group.unitsPerFile].withContiguousStorageIfAvailable {
          XXHash64.hash(UnsafeRawBufferPointer($0))
        }!
        byHash[key, default: []].append(member)
      }
      for members in byHash.values where members.count >= 2 {
        compareGroups.append(members)
      }
    }
    hashGroups = []
    unitHashes = []
    startComparing()
  }

  // MARK: - Compare

  private func startComparing() {
    guard !isCancelled else { return }
    var units: [CompareUnit] = []
    for (group, members) in compareGroups.enumerated() {
      let size = catalog.files[Int(members[0])].size
      var offset: Int64 = 0
      while offset < size {
        let length = min(Self.rangeSize, size - offset)
        units.append(CompareUnit(group: Int32(group), members: members, offset: offset, length: length))
        offset += length
      }
    }
    compareLabels = Array(repeating: [], count: compareGroups.count)
    guard !units.isEmpty else { return }
    configuration.hooks.beforeComparing?()
    let total = units.reduce(0) { $0 + $1.length * Int64($1.members.count) }
    status.begin(.comparing, total: total)
    setMaxConcurrentTasks(readers, forGroup: CompareRanges.self)
    let cost: (CompareUnit) -> Int64 = { $0.length * Int64($0.members.count) }
    queue(units, total: total, length: cost) { batch, _ in
      trackAndQueue(CompareRanges(catalog: catalog, units: batch, status: status, hooks: configuration.hooks)) {
        self.compared($0)
      }
    }
  }

  private func compared(_ task: CompareRanges) {
    statistics.bytesRead += task.bytesRead
    for (unit, labels) in zip(task.units, task.labels) {
      compareLabels[Int(unit.group)].append(labels)
    }
    for (file, failure) in task.failures {
      skipFile(file, failure)
    }
  }

  // MARK: - Report

  public override func allTasksFinished() {
    guard !isCancelled else { return }
    status.begin(.done, total: 0)
    var sets: [DuplicateSet] = []
    for members in directSets {
      // Empty files are not read: each is checked with `stat` instead (only with --min-size 0).
      // Hard links of one file (-H) are one file: nothing to check.
      guard members.count >= 2, catalog.files[Int(members[0])].size == 0 else {
        sets.append(duplicateSet(members))
        continue
      }
      let unchanged = members.filter { member in
        if catalog.isUnchanged(Int(member)) { return true }
        skipFile(member, .changedWhileCompared)
        return false
      }
      if unchanged.count >= 2
        || (configuration.listHardLinks && unchanged.count == 1 && names(of: unchanged[0]).count >= 2)
      {
        sets.append(duplicateSet(unchanged))
      }
    }
    for (group, members) in compareGroups.enumerated() {
      let unitLabels = compareLabels[group]
      guard !unitLabels.isEmpty else { continue }
      if unitLabels.count == 1 {
        // One range (files up to 64 MiB, nearly every group): its labels are the classes.
        var classes = [[UInt32]](repeating: [], count: members.count)
        for (position, label) in unitLabels[0].enumerated() where label >= 0 && !failedFiles.contains(members[position])
        {
          classes[Int(label)].append(members[position])
        }
        for identical in classes where identical.count >= 2 {
          sets.append(duplicateSet(identical))
        }
        continue
      }
      // Two members are identical if every range put them in the same class.
      var classes: [[Int32]: [UInt32]] = [:]
      for (position, member) in members.enumerated() where !failedFiles.contains(member) {
        let signature = unitLabels.map { $0[position] }
        guard !signature.contains(-1) else { continue }
        classes[signature, default: []].append(member)
      }
      for identical in classes.values where identical.count >= 2 {
        sets.append(duplicateSet(identical))
      }
    }
    sets.sort { $0.precedes($1) }
    report = DuplicateReport(
      sets: sets,
      skipped: skipped.sorted { PathOrder.precedes($0.path, $1.path) },
      statistics: statistics,
      minimumSize: configuration.minimumSize,
      listsHardLinks: configuration.listHardLinks,
      elapsed: .now - startTime)
  }

  /// The set of the files `members` (representatives), with their other hard links if listed.
  private func duplicateSet(_ members: [UInt32]) -> DuplicateSet {
    var paths: [[UInt8]] = []
    for member in members {
      paths.append(Array(catalog.path(Int(member))))
      guard linkCounts[member] != nil else { continue }
      for index in names(of: member).dropFirst() {
        statistics.hardLinks += 1
        if configuration.listHardLinks { paths.append(Array(catalog.path(Int(index)))) }
      }
    }
    paths.sort(by: PathOrder.precedes)
    return DuplicateSet(size: catalog.files[Int(members[0])].size, paths: paths, distinctFiles: members.count)
  }

  private func skip(_ path: [UInt8], _ failure: ReadFailure) {
    skipped.append(SkippedItem(path: path, reason: failure.reason, changed: failure.isChange))
  }

  private func skipFile(_ file: UInt32, _ failure: ReadFailure) {
    if failedFiles.insert(file).inserted {
      skip(Array(catalog.path(Int(file))), failure)
    }
  }
}
