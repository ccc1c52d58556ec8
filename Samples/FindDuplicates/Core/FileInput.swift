import Glibc

/// Why a file or directory was skipped, worded the same for both: the system's message for the
/// error (`strerror`), or that the file changed while it was read.
public struct ReadFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// The reason, e.g. "Permission denied".
  public let reason: String
  /// Whether the file was readable but changed during the search (rather than unreadable).
  public let isChange: Bool

  /// A failure with `reason`.
  public init(reason: String, isChange: Bool = false) {
    self.reason = reason
    self.isChange = isChange
  }

  /// The failure for `errno` value `code`.
  public init(errno code: Int32) {
    self.init(reason: String(cString: strerror(code)))
  }

  /// The file ended before the size the scan found.
  public static func sizeChanged(expected: Int64, read: Int64) -> ReadFailure {
    ReadFailure(reason: "changed while being read (expected \(expected) bytes, got \(read))", isChange: true)
  }

  /// After its bytes were compared, the file's size, times, device or inode (`fstat` on the
  /// descriptor they were read from) were no longer those it was listed with: its content
  /// changed during the search, or the path named another file when it was opened.
  public static let changedWhileCompared = ReadFailure(reason: "changed during the search", isChange: true)

  /// The reason.
  public var description: String { reason }
}

/// A file open for reading with `pread(2)` into caller-provided buffers: no Foundation, no
/// allocation per read.
///
/// Opened non-blocking, so that a path that was a regular file during the scan and has since
/// been replaced by a FIFO ends at once instead of waiting for a writer; that flag has no effect
/// on regular files.
struct FileInput {
  /// Buffers of this size are read at a time: large enough for few system calls, small enough
  /// that a task checks for cancellation every few milliseconds.
  static let chunkSize = 256 * 1024

  let descriptor: Int32

  /// Opens the NUL-terminated `path`; returns the descriptor, or -1 with `errno` set.
  static func open(_ path: UnsafePointer<CChar>) -> Int32 {
    Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
  }

  /// Tells the kernel the file will be read from start to end (more read-ahead on a cold cache).
  func adviseSequential() {
    _ = posix_fadvise(descriptor, 0, 0, POSIX_FADV_SEQUENTIAL)
  }

  func close() {
    _ = Glibc.close(descriptor)
  }

  /// Whether the open file is still the one `stamp` describes, unchanged: same device, inode,
  /// size, modification and status-change times (one `fstat`, no path lookup).
  func isUnchanged(since stamp: FileStamp) -> Bool {
    var status = stat()
    guard fstat(descriptor, &status) == 0 else { return false }
    return FileStamp(status) == stamp
  }

  /// Reads up to `count` bytes at `offset` into `buffer`; fewer only at the end of the file.
  func read(into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int64) throws(ReadFailure) -> Int {
    var total = 0
    while total < count {
      let result = pread(descriptor, buffer.baseAddress! + total, count - total, off_t(offset) + off_t(total))
      if result > 0 {
        total += result
      } else if result == 0 {
        break
      } else if errno != EINTR {
        throw ReadFailure(errno: errno)
      }
    }
    return total
  }

  /// Reads exactly `count` bytes at `offset`, or throws: a file shorter than the scan found
  /// changed meanwhile.
  func readExactly(
    into buffer: UnsafeMutableRawBufferPointer, count: Int, at offset: Int64, fileSize: Int64
  ) throws(ReadFailure) {
    let got = try read(into: buffer, count: count, at: offset)
    if got != count {
      throw .sizeChanged(expected: fileSize, read: offset + Int64(got))
    }
  }
}

/// A buffer for one task's reads, freed with the task.
final class ReadBuffer: @unchecked Sendable {
  // @unchecked Sendable: used by one task at a time, on the thread running it.
  let bytes: UnsafeMutableRawBufferPointer

  init(size: Int = FileInput.chunkSize) {
    bytes = .allocate(byteCount: size, alignment: 64)
  }

  deinit {
    bytes.deallocate()
  }
}
