import Glibc
import JobKit

/// A task that hashes the first ``blockSize`` bytes (or all, if fewer) of a batch of files.
///
/// One task per batch rather than per file: for small files the open, read and close cost less
/// than queueing and routing a task. It checks for cancellation between files.
final class HashFirstBlocks: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results are written only by `operationStart()` before it calls
  // `operationDone`, and read only once the task finished.

  /// How much of each file this step reads.
  static let blockSize = 16 * 1024

  let catalog: FileCatalog
  /// The files to hash: indices into `catalog.files`.
  let files: [UInt32]
  let status: ProgressStatus
  /// The hash of each file of ``files``, in order; 0 for a file that failed.
  private(set) var hashes: [UInt64] = []
  /// The files that could not be read: their index in ``files`` and why.
  private(set) var failures: [(position: Int, failure: ReadFailure)] = []
  /// Bytes read.
  private(set) var bytesRead: Int64 = 0

  init(catalog: FileCatalog, files: [UInt32], status: ProgressStatus) {
    self.catalog = catalog
    self.files = files
    self.status = status
  }

  override func operationStart() {
    let buffer = ReadBuffer(size: Self.blockSize)
    hashes.reserveCapacity(files.count)
    var reported = 0
    for (position, file) in files.enumerated() {
      if isCancelled { break }
      do {
        hashes.append(try hash(Int(file), buffer: buffer.bytes))
      } catch {
        hashes.append(0)
        failures.append((position, error))
      }
      if position - reported >= 15 {
        status.advance(by: Int64(position + 1 - reported))
        reported = position + 1
      }
    }
    status.advance(by: Int64(hashes.count - reported))
    operationDone()
  }

  private func hash(_ file: Int, buffer: UnsafeMutableRawBufferPointer) throws(ReadFailure) -> UInt64 {
    let size = catalog.files[file].size
    let input = try catalog.open(file)
    defer { input.close() }
    let count = Int(min(size, Int64(Self.blockSize)))
    try input.readExactly(into: buffer, count: count, at: 0, fileSize: size)
    bytesRead += Int64(count)
    return XXHash64.hash(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
  }
}

/// A piece of a file to hash: `length` bytes at `offset`.
struct HashUnit: Sendable {
  var file: UInt32
  var offset: Int64
  var length: Int64
}

/// A task that hashes pieces of files (``HashUnit``s), a batch of them per task, so that small
/// files share a task and a large file is split over tasks that run in parallel. Reads
/// ``FileInput/chunkSize`` bytes at a time and checks for cancellation between reads.
final class HashRanges: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results are written only by `operationStart()` before it calls
  // `operationDone`, and read only once the task finished.

  let catalog: FileCatalog
  let units: [HashUnit]
  let status: ProgressStatus
  /// The hash of each unit, in order; 0 for one that failed.
  private(set) var hashes: [UInt64] = []
  /// The units whose file could not be read: their index in ``units`` and why.
  private(set) var failures: [(position: Int, failure: ReadFailure)] = []
  private(set) var bytesRead: Int64 = 0

  init(catalog: FileCatalog, units: [HashUnit], status: ProgressStatus) {
    self.catalog = catalog
    self.units = units
    self.status = status
  }

  override func operationStart() {
    let buffer = ReadBuffer(size: Int(min(units.reduce(0) { max($0, $1.length) }, Int64(FileInput.chunkSize))))
    for (position, unit) in units.enumerated() {
      if isCancelled { break }
      do {
        hashes.append(try hash(unit, buffer: buffer.bytes))
      } catch {
        hashes.append(0)
        failures.append((position, error))
      }
    }
    operationDone()
  }

  private func hash(_ unit: HashUnit, buffer: UnsafeMutableRawBufferPointer) throws(ReadFailure) -> UInt64 {
    let file = Int(unit.file)
    let size = catalog.files[file].size
    let input = try catalog.open(file)
    defer { input.close() }
    if unit.length > Int64(FileInput.chunkSize) { input.adviseSequential() }
    var hasher = XXHash64()
    var position: Int64 = 0
    var reported: Int64 = 0
    defer { status.advance(by: unit.length - reported) }  // the unit counts as done, even if it failed
    while position < unit.length {
      if isCancelled { return 0 }
      let count = Int(min(Int64(buffer.count), unit.length - position))
      try input.readExactly(into: buffer, count: count, at: unit.offset + position, fileSize: size)
      hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
      position += Int64(count)
      bytesRead += Int64(count)
      status.advance(by: Int64(count))
      reported += Int64(count)
    }
    return hasher.finalize()
  }
}
