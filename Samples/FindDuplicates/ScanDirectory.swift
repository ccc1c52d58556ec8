import Foundation
import JobKit

/// A regular file found by a scan.
struct ScannedFile: Sendable {
  let path: String
  let size: Int
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

  let directory: URL
  private(set) var subdirectories: [URL] = []
  private(set) var files: [ScannedFile] = []
  /// Entries whose type or size could not be read.
  private(set) var unreadableEntries: [SkippedItem] = []
  /// Symbolic links, FIFOs, sockets and devices.
  private(set) var ignoredEntries = 0

  private static let keys: [URLResourceKey] = [
    .isSymbolicLinkKey, .isDirectoryKey, .isRegularFileKey, .fileSizeKey,
  ]
  private static let keySet = Set(keys)

  init(directory: URL) {
    self.directory = directory
  }

  override func operationStart() {
    let entries: [URL]
    do {
      entries = try FileManager.default.contentsOfDirectory(
        at: directory, includingPropertiesForKeys: Self.keys)
    } catch {
      operationDone(error: error)
      return
    }
    for entry in entries {
      guard !isCancelled else { break }
      do {
        // Resource values describe the entry itself (lstat), not what a symbolic link points to.
        let values = try entry.resourceValues(forKeys: Self.keySet)
        if values.isSymbolicLink == true {
          ignoredEntries += 1
        } else if values.isDirectory == true {
          subdirectories.append(entry)
        } else if values.isRegularFile == true {
          files.append(ScannedFile(path: entry.path, size: values.fileSize ?? 0))
        } else {
          ignoredEntries += 1
        }
      } catch {
        unreadableEntries.append(SkippedItem(path: entry.path, error: error))
      }
    }
    operationDone()
  }
}
