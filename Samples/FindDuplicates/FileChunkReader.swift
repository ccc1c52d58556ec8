import Foundation

/// Reads a regular file from start to end in chunks of ``chunkSize`` bytes, for hashing and
/// comparing files of any size in constant memory.
///
/// The file is opened non-blocking: if a path that was a regular file during the scan has been
/// replaced by a FIFO since, reading it ends at once instead of waiting for a writer forever.
/// Non-blocking mode has no effect on regular files.
struct FileChunkReader {
  /// The size of every chunk but the last.
  static let chunkSize = 64 * 1024

  private let handle: FileHandle

  /// Opens the file at `path` for reading.
  init(path: String) throws(FileReadError) {
    let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else {
      throw FileReadError.cannotOpen(reason: String(cString: strerror(errno)))
    }
    handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
  }

  /// The next chunk: exactly ``chunkSize`` bytes, fewer only at the end of the file, or `nil`
  /// once the whole file was read.
  ///
  /// Always returning full chunks lets two readers be compared chunk by chunk.
  func nextChunk() throws -> Data? {
    var chunk = Data()
    while chunk.count < Self.chunkSize {
      guard let data = try handle.read(upToCount: Self.chunkSize - chunk.count), !data.isEmpty
      else { break }
      if chunk.isEmpty {
        chunk = data
      } else {
        chunk.append(data)
      }
    }
    return chunk.isEmpty ? nil : chunk
  }
}

/// Why a file could not be read to the end.
enum FileReadError: Error, CustomStringConvertible {
  case cannotOpen(reason: String)
  /// The file does not have the size the scan found: it changed while the tool ran.
  case sizeChanged(expected: Int, actual: Int)

  var description: String {
    switch self {
    case .cannotOpen(let reason):
      return reason
    case .sizeChanged(let expected, let actual):
      return "changed while being read (expected \(expected) bytes, read \(actual))"
    }
  }
}
