import Glibc

/// The identity of a file on disk: two paths with the same ID are hard links to one file.
public struct FileID: Hashable, Sendable {
  /// `st_dev`.
  public let device: UInt64
  /// `st_ino`.
  public let inode: UInt64

  /// The ID of the file `status` describes.
  public init(_ status: stat) {
    device = UInt64(status.st_dev)
    inode = UInt64(status.st_ino)
  }

  /// An ID from its parts.
  public init(device: UInt64, inode: UInt64) {
    self.device = device
    self.inode = inode
  }
}

/// What `stat` says about a file when it is listed: which file it is and which version of its
/// content. A file whose stamp differs later (`fstat` on the descriptor its bytes were read
/// from) changed during the search, or the path now names another file.
public struct FileStamp: Hashable, Sendable {
  /// The file's device and inode.
  public var id: FileID
  /// The size in bytes.
  public var size: Int64
  /// `st_mtim` in nanoseconds: the content's last change.
  public var modified: Int64
  /// `st_ctim` in nanoseconds: the last change of the content or the inode (a write, a
  /// `utimensat` that set `st_mtim` back, a `rename` over it); it cannot be set from user space.
  public var changed: Int64

  /// The stamp of the file `status` describes.
  public init(_ status: stat) {
    id = FileID(status)
    size = Int64(status.st_size)
    modified = Int64(status.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_mtim.tv_nsec)
    changed = Int64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_ctim.tv_nsec)
  }

  /// A stamp from its parts.
  public init(id: FileID, size: Int64, modified: Int64 = 0, changed: Int64 = 0) {
    self.id = id
    self.size = size
    self.modified = modified
    self.changed = changed
  }
}

/// One regular file found by the scan: 48 bytes, its path kept in a ``PathArena``.
public struct FileRecord: Sendable {
  /// Where the path starts in the arena.
  public var pathOffset: UInt32
  /// The path's length in bytes, without the NUL that follows it in the arena.
  public var pathLength: UInt32
  /// Identity, size and times when the file was listed.
  public var stamp: FileStamp

  /// The size in bytes when the file was listed.
  public var size: Int64 {
    get { stamp.size }
    set { stamp.size = newValue }
  }
  /// The file's device and inode.
  public var id: FileID {
    get { stamp.id }
    set { stamp.id = newValue }
  }
}

/// File paths as raw bytes, all in one buffer: each path is followed by a NUL so that it can be
/// passed to `open(2)` in place. One allocation for every path instead of a `String` each.
public struct PathArena: Sendable {
  /// The paths, each followed by a NUL.
  public private(set) var bytes: [UInt8] = []

  /// An empty arena.
  public init() {}

  /// Appends `directory`, a `/` unless `directory` ends with one, and `name`; returns the
  /// path's offset and length.
  public mutating func append(
    directory: [UInt8], name: UnsafeRawBufferPointer
  ) -> (offset: UInt32, length: UInt32) {
    let offset = bytes.count
    bytes.append(contentsOf: directory)
    if directory.last != UInt8(ascii: "/") {
      bytes.append(UInt8(ascii: "/"))
    }
    bytes.append(contentsOf: name)
    let length = bytes.count - offset
    bytes.append(0)
    return (UInt32(offset), UInt32(length))
  }

  /// Appends `path` as it is; returns its offset and length.
  public mutating func append(path: some Collection<UInt8>) -> (offset: UInt32, length: UInt32) {
    let offset = bytes.count
    bytes.append(contentsOf: path)
    let length = bytes.count - offset
    bytes.append(0)
    return (UInt32(offset), UInt32(length))
  }
}

/// The files a scan found, frozen once the scan is over so that the reading tasks can share it
/// without copying (it is never mutated again).
public final class FileCatalog: Sendable {
  /// The paths.
  public let arena: PathArena
  /// The files, sorted by size, then device and inode, then path.
  public let files: [FileRecord]

  init(arena: PathArena, files: [FileRecord]) {
    self.arena = arena
    self.files = files
  }

  /// The path of file `index`.
  public func path(_ index: Int) -> ArraySlice<UInt8> {
    let record = files[index]
    let start = Int(record.pathOffset)
    return arena.bytes[start..<start + Int(record.pathLength)]
  }

  /// Opens file `index` for reading.
  func open(_ index: Int) throws(ReadFailure) -> FileInput {
    let offset = Int(files[index].pathOffset)
    let descriptor = arena.bytes.withUnsafeBytes { bytes in
      FileInput.open(bytes.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self))
    }
    guard descriptor >= 0 else { throw ReadFailure(errno: errno) }
    return FileInput(descriptor: descriptor)
  }

  /// Whether `stat` on the path of file `index` still shows the stamp it was listed with (for
  /// files whose bytes are not compared: the empty ones).
  func isUnchanged(_ index: Int) -> Bool {
    let offset = Int(files[index].pathOffset)
    var status = stat()
    let result = arena.bytes.withUnsafeBytes { bytes in
      stat(bytes.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self), &status)
    }
    return result == 0 && FileStamp(status) == files[index].stamp
  }

  /// Whether the path of `first` sorts before the path of `second`, byte by byte.
  public func pathPrecedes(_ first: Int, _ second: Int) -> Bool {
    path(first).lexicographicallyPrecedes(path(second))
  }
}

/// Byte-by-byte order of paths with `memcmp`: the same order as `lexicographicallyPrecedes` on
/// `UInt8`, without the generic iteration (sorting tens of thousands of paths that share a long
/// prefix is otherwise noticeable).
enum PathOrder {
  static func precedes(_ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer) -> Bool {
    let common = min(first.count, second.count)
    if common > 0 {
      let order = memcmp(first.baseAddress!, second.baseAddress!, common)
      if order != 0 { return order < 0 }
    }
    return first.count < second.count
  }

  static func precedes(_ first: [UInt8], _ second: [UInt8]) -> Bool {
    first.withUnsafeBytes { first in second.withUnsafeBytes { precedes(first, $0) } }
  }
}
