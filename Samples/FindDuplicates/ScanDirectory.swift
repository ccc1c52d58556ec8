import Foundation
import JobKit

/// A regular file found by a scan.
struct ScannedFile: Sendable {
  let path: String
  let size: Int
  /// The file's device and inode: two paths with the same ID are hard links to one file.
  let id: FileID
}

/// The identity of a file on disk.
struct FileID: Hashable, Sendable {
  let device: UInt64
  let inode: UInt64
}

/// A task that lists one directory: its subdirectories, its regular files with their sizes, and
/// the entries it could not inspect. It finishes with an error if the directory itself cannot be
/// listed.
///
/// Symbolic links are never followed (a link to a directory could make a cycle), and FIFOs,
/// sockets and devices are not files to compare (opening a FIFO could block): both are only
/// counted in ``ignoredEntries``.
final class ScanDirectory: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results below are written only by `operationStart()` before it
  // calls `operationDone`, and read only once the task finished.

  let directory: String
  private(set) var subdirectories: [String] = []
  private(set) var files: [ScannedFile] = []
  /// Entries whose type or size could not be read.
  private(set) var unreadableEntries: [SkippedItem] = []
  /// Symbolic links, FIFOs, sockets and devices.
  private(set) var ignoredEntries = 0

  init(directory: String) {
    self.directory = directory
    super.init()
    name = directory  // a failure of this task is reported under this name: the path
  }

  override func operationStart() {
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: directory)
    } catch {
      operationDone(error: error)
      return
    }
    let prefix = directory.hasSuffix("/") ? directory : directory + "/"
    for name in names {
      guard !isCancelled else { break }
      let path = prefix + name
      // lstat describes the entry itself, not what a symbolic link points to. (It is also many
      // times faster than URL.resourceValues on Linux, which gathers every attribute, owner
      // names included, for each file.)
      var status = stat()
      guard lstat(path, &status) == 0 else {
        let reason = String(cString: strerror(errno))
        unreadableEntries.append(SkippedItem(path: path, reason: reason))
        continue
      }
      switch status.st_mode & S_IFMT {
      case S_IFDIR:
        subdirectories.append(path)
      case S_IFREG:
        let id = FileID(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        files.append(ScannedFile(path: path, size: Int(status.st_size), id: id))
      default:
        ignoredEntries += 1
      }
    }
    operationDone()
  }
}
