import Glibc
import JobKit

/// Bytes `offset..<offset + length` of the files of one group of likely duplicates, to compare.
struct CompareUnit: Sendable {
  /// Which group (an index the job keeps).
  var group: Int32
  /// The files: indices into the catalog.
  var members: [UInt32]
  var offset: Int64
  var length: Int64
}

/// A task that compares files byte by byte, one range (``CompareUnit``) at a time, a batch of
/// ranges per task: many small groups share one task, and a large group is split into ranges
/// that run in parallel.
///
/// For each range it takes the first remaining file as the reference and streams the others
/// against it, chunk by chunk, so the reference is read once per chunk however many files are
/// equal to it; files that differ go to the next round with a reference of their own (a hash
/// collision is rare, so there is usually one round). The result for each unit is a label per
/// member: the position of the member it is equal to over this range, or -1 if it could not be
/// read. Checks for cancellation between chunks.
///
/// A file found equal to another is checked once its bytes were compared: `fstat` on the
/// descriptor they were read from must show the ``FileStamp`` it was listed with (device,
/// inode, size, modification and status-change times). One that does not changed during the
/// search: it is listed as a failure (``ReadFailure/changedWhileCompared``) and left out of the
/// sets. When the reference changed, the files equal to it still equal each other (each chunk
/// of each was compared with the same buffer, and they did not change), so only the reference
/// is left out. Files that differ early are not checked: they are in no set of this round.
final class CompareRanges: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results are written only by `operationStart()` before it calls
  // `operationDone`, and read only once the task finished.

  /// At most this many files are open at once per task.
  static let maxOpenFiles = 64

  let catalog: FileCatalog
  let units: [CompareUnit]
  let status: ProgressStatus
  let hooks: SearchHooks
  /// For each unit, a label per member (see the type's description).
  private(set) var labels: [[Int32]] = []
  /// Files that could not be read, and why.
  private(set) var failures: [(file: UInt32, failure: ReadFailure)] = []
  private(set) var bytesRead: Int64 = 0

  /// Progress of the current unit not yet reported: never more than its size, so that the
  /// phase's progress never passes its total when a reference is read in several rounds.
  private var unreported: Int64 = 0
  // Allocated when the task starts, not when it is queued: many tasks may wait in the queue.
  private var reference = ReadBuffer(size: 0)
  private var other = ReadBuffer(size: 0)

  init(catalog: FileCatalog, units: [CompareUnit], status: ProgressStatus, hooks: SearchHooks = SearchHooks()) {
    self.catalog = catalog
    self.units = units
    self.status = status
    self.hooks = hooks
  }

  override func operationStart() {
    let largest = units.reduce(0) { max($0, $1.length) }
    reference = ReadBuffer(size: Int(min(largest, Int64(FileInput.chunkSize))))
    other = ReadBuffer(size: Int(min(largest, Int64(FileInput.chunkSize))))
    for unit in units {
      if isCancelled { break }
      unreported = unit.length * Int64(unit.members.count)
      labels.append(compare(unit))
      // The unit counts as fully done: files that differed early were not read to the end.
      status.advance(by: unreported)
    }
    operationDone()
  }

  private func compare(_ unit: CompareUnit) -> [Int32] {
    var labels = [Int32](repeating: -1, count: unit.members.count)
    var pending = Array(unit.members.indices)
    while let referencePosition = pending.first, !isCancelled {
      pending.removeFirst()
      guard !pending.isEmpty else {
        labels[referencePosition] = Int32(referencePosition)
        break
      }
      var different: [Int] = []
      var referenceFailed = false
      var start = 0
      while start < pending.count, !referenceFailed, !isCancelled {
        let batch = Array(pending[start..<min(pending.count, start + Self.maxOpenFiles - 1)])
        start += batch.count
        let outcome = compareBatch(unit, reference: referencePosition, others: batch)
        switch outcome {
        case .referenceFailed:
          referenceFailed = true
          different += batch
          different += pending[start...]
        case .compared(let equal, let unequal, let failed):
          for position in equal { labels[position] = Int32(referencePosition) }
          different += unequal
          for position in failed { labels[position] = -1 }
        }
      }
      if !referenceFailed { labels[referencePosition] = Int32(referencePosition) }
      pending = different
    }
    return labels
  }

  private enum BatchOutcome {
    case referenceFailed
    case compared(equal: [Int], unequal: [Int], failed: [Int])
  }

  private func didRead(_ count: Int) {
    bytesRead += Int64(count)
    let reported = min(Int64(count), unreported)
    unreported -= reported
    status.advance(by: reported)
  }

  private func open(_ unit: CompareUnit, _ position: Int) -> FileInput? {
    let file = unit.members[position]
    do {
      return try catalog.open(Int(file))
    } catch {
      failures.append((file, error))
      return nil
    }
  }

  private func compareBatch(_ unit: CompareUnit, reference position: Int, others: [Int]) -> BatchOutcome {
    guard let referenceInput = open(unit, position) else { return .referenceFailed }
    defer { referenceInput.close() }
    var active: [(position: Int, input: FileInput)] = []
    var unequal: [Int] = []
    var failed: [Int] = []
    defer { for (_, input) in active { input.close() } }
    for other in others {
      if let input = open(unit, other) { active.append((other, input)) } else { failed.append(other) }
    }
    let sequential = unit.length > Int64(FileInput.chunkSize)
    if sequential {
      referenceInput.adviseSequential()
      for (_, input) in active { input.adviseSequential() }
    }
    let referenceSize = catalog.files[Int(unit.members[position])].size
    var offset = unit.offset
    let end = unit.offset + unit.length
    while offset < end, !active.isEmpty {
      if isCancelled { break }
      let count = Int(min(Int64(reference.bytes.count), end - offset))
      do {
        try referenceInput.readExactly(into: reference.bytes, count: count, at: offset, fileSize: referenceSize)
      } catch {
        failures.append((unit.members[position], error))
        return .referenceFailed
      }
      didRead(count)
      var index = 0
      while index < active.count {
        let (otherPosition, input) = active[index]
        let otherSize = catalog.files[Int(unit.members[otherPosition])].size
        do {
          try input.readExactly(into: other.bytes, count: count, at: offset, fileSize: otherSize)
          didRead(count)
          if memcmp(reference.bytes.baseAddress!, other.bytes.baseAddress!, count) == 0 {
            index += 1
            continue
          }
          unequal.append(otherPosition)
        } catch {
          failures.append((unit.members[otherPosition], error))
          failed.append(otherPosition)
        }
        input.close()
        active.remove(at: index)
      }
      offset += Int64(count)
    }
    guard !active.isEmpty, !isCancelled else {
      return .compared(equal: active.map(\.position), unequal: unequal, failed: failed)
    }
    if let hook = hooks.afterComparingBytes {
      let positions = [position] + active.map(\.position)
      hook(positions.map { Array(catalog.path(Int(unit.members[$0]))) })
    }
    // The bytes compared must be those the files were listed with (see the type's description).
    var equal: [Int] = []
    for (otherPosition, input) in active {
      let file = unit.members[otherPosition]
      if input.isUnchanged(since: catalog.files[Int(file)].stamp) {
        equal.append(otherPosition)
      } else {
        failures.append((file, .changedWhileCompared))
        failed.append(otherPosition)
      }
    }
    let referenceFile = unit.members[position]
    if !referenceInput.isUnchanged(since: catalog.files[Int(referenceFile)].stamp) {
      failures.append((referenceFile, .changedWhileCompared))
    }
    return .compared(equal: equal, unequal: unequal, failed: failed)
  }
}
