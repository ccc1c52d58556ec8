import Foundation
import JobKit

/// A task that computes the ``ContentHasher`` hash of one file, reading it in chunks. It
/// finishes with an error if the file cannot be read, or no longer has the size the scan found.
final class HashFile: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results below are written only by `operationStart()` before it
  // calls `operationDone`, and read only once the task finished.

  let file: ScannedFile
  /// The content hash; `nil` if the task failed or was cancelled.
  private(set) var contentHash: UInt64?
  /// How many bytes were read and hashed, also when the task failed.
  private(set) var bytesHashed = 0

  init(file: ScannedFile) {
    self.file = file
    super.init()
    name = file.path  // a failure of this task is reported under this name: the path
  }

  override func operationStart() {
    do {
      let reader = try FileChunkReader(path: file.path)
      var hasher = ContentHasher()
      while let chunk = try reader.nextChunk() {
        guard !isCancelled else { break }
        hasher.combine(chunk)
        bytesHashed += chunk.count
      }
      if !isCancelled {
        guard bytesHashed == file.size else {
          throw FileReadError.sizeChanged(expected: file.size, actual: bytesHashed)
        }
        contentHash = hasher.finalize()
      }
      operationDone()
    } catch {
      operationDone(error: error)
    }
  }
}
