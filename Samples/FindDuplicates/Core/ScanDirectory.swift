import Glibc
import JobKit

/// A task that lists one directory with `opendir`/`readdir` and `fstatat`, on raw name bytes, so
/// that names that are not UTF-8 are found like any other. It finishes with a ``ReadFailure`` if
/// the directory itself cannot be opened.
///
/// Symbolic links are followed only with `followSymlinks` (the job then guards against cycles);
/// otherwise they are counted in ``ignoredEntries`` with FIFOs, sockets and devices, which are
/// never compared (opening a FIFO could block).
final class ScanDirectory: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results are written only by `operationStart()` before it calls
  // `operationDone`, and read only once the task finished.

  /// What a directory entry is.
  enum Kind: UInt8 {
    case file
    case directory
  }

  /// One regular file or subdirectory; its name is in ``names``.
  struct Entry {
    var nameStart: UInt32
    var nameLength: UInt32
    var kind: Kind
    /// What `fstatat` said: the file's identity, size and times (for a directory, its identity).
    var stamp: FileStamp
  }

  /// The directory's path, without a trailing NUL.
  let directory: [UInt8]
  let followSymlinks: Bool
  /// Every name of ``entries`` and ``failures``, one after the other.
  private(set) var names: [UInt8] = []
  private(set) var entries: [Entry] = []
  /// Entries that could not be inspected: the range of the name in ``names``, and why.
  private(set) var failures: [(nameStart: UInt32, nameLength: UInt32, failure: ReadFailure)] = []
  /// Symbolic links not followed, broken links, FIFOs, sockets and devices.
  private(set) var ignoredEntries = 0

  init(directory: [UInt8], followSymlinks: Bool) {
    self.directory = directory
    self.followSymlinks = followSymlinks
  }

  override func operationStart() {
    let stream = directory.withUnsafeBufferPointer { bytes in
      // `directory` has no NUL; copy it into a C string.
      let path = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
      defer { path.deallocate() }
      bytes.withMemoryRebound(to: CChar.self) { path.update(from: $0.baseAddress!, count: bytes.count) }
      path[bytes.count] = 0
      return opendir(path)
    }
    guard let stream else {
      operationDone(error: ReadFailure(errno: errno))
      return
    }
    defer { closedir(stream) }
    let directoryDescriptor = dirfd(stream)
    var status = stat()
    var count = 0
    while let entry = readdir(stream) {
      count += 1
      if count & 63 == 0, isCancelled { break }
      withUnsafePointer(to: &entry.pointee.d_name) { tuple in
        tuple.withMemoryRebound(to: CChar.self, capacity: 256) { name in
          let length = strlen(name)
          if name[0] == 0x2E && (length == 1 || (length == 2 && name[1] == 0x2E)) { return }  // "." and ".."
          inspect(name, length: length, in: directoryDescriptor, status: &status)
        }
      }
    }
    operationDone()
  }

  private func inspect(_ name: UnsafePointer<CChar>, length: Int, in directory: Int32, status: inout stat) {
    let nameStart = UInt32(names.count)
    names.append(contentsOf: UnsafeRawBufferPointer(start: name, count: length))
    let nameLength = UInt32(length)
    let flags = followSymlinks ? 0 : AT_SYMLINK_NOFOLLOW
    guard fstatat(directory, name, &status, flags) == 0 else {
      let code = errno
      // A dangling or looping symbolic link, when following links: not a file to compare.
      if followSymlinks, code == ENOENT || code == ELOOP,
        fstatat(directory, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFLNK
      {
        names.removeLast(length)
        ignoredEntries += 1
        return
      }
      failures.append((nameStart, nameLength, ReadFailure(errno: code)))
      return
    }
    switch status.st_mode & S_IFMT {
    case S_IFREG:
      entries.append(Entry(nameStart: nameStart, nameLength: nameLength, kind: .file, stamp: FileStamp(status)))
    case S_IFDIR:
      entries.append(Entry(nameStart: nameStart, nameLength: nameLength, kind: .directory, stamp: FileStamp(status)))
    default:
      names.removeLast(length)
      ignoredEntries += 1
    }
  }
}
