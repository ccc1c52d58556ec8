import Glibc

/// The Merkle hash `tree-hash` computes, defined so that anyone can recompute it:
///
/// - A regular file's hash is the SHA-256 of its contents (what `sha256sum` prints).
/// - A directory's hash is the SHA-256 of one record per entry, in the byte order of the
///   entries' UTF-8 names: `f` for a regular file or `d` for a directory, a space, the entry's hash
///   in 64 lowercase hex digits, a space, the name, and a NUL byte. An empty directory hashes the
///   empty message.
/// - Symbolic links (never followed), sockets, FIFOs and devices are left out; names must be
///   UTF-8.
///
/// The tree's hash is its root directory's.
enum MerkleTree {
  /// The hash of a directory whose entries hashed to `children`.
  static func directoryHash(_ children: [(entry: DirectoryEntry, hash: String)]) -> String {
    var hasher = SHA256()
    for child in children.sorted(by: { $0.entry.name.utf8.lexicographicallyPrecedes($1.entry.name.utf8) }) {
      var record: [UInt8] = [child.entry.kind == .file ? UInt8(ascii: "f") : UInt8(ascii: "d"), UInt8(ascii: " ")]
      record.append(contentsOf: child.hash.utf8)
      record.append(UInt8(ascii: " "))
      record.append(contentsOf: child.entry.name.utf8)
      record.append(0)
      hasher.update(record)
    }
    return hasher.finalize()
  }

  /// The hex SHA-256 of the contents of the regular file at `path`, read in 256 KiB pieces.
  static func fileHash(atPath path: String) throws(TreeHashError) -> String {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw TreeHashError(path: path, errno: errno) }
    defer { close(descriptor) }
    var hasher = SHA256()
    var buffer = [UInt8](repeating: 0, count: 256 * 1024)
    while true {
      let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
      if count < 0 {
        if errno == EINTR { continue }
        throw TreeHashError(path: path, errno: errno)
      }
      if count == 0 { break }
      buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
    }
    return hasher.finalize()
  }
}

/// A regular file or a directory found in a directory.
struct DirectoryEntry: Sendable, Equatable {
  /// Whether the entry is a file (a leaf) or a directory (an inner node).
  enum Kind: Sendable {
    case file
    case directory
  }

  /// The entry's name, without its directory.
  var name: String
  /// What it is.
  var kind: Kind

  /// The regular files and directories in the directory at `path`, without `.` and `..`, in no
  /// particular order. Other kinds of entries are left out (see ``MerkleTree``).
  static func list(atPath path: String) throws(TreeHashError) -> [DirectoryEntry] {
    guard let directory = opendir(path) else { throw TreeHashError(path: path, errno: errno) }
    defer { closedir(directory) }
    var entries: [DirectoryEntry] = []
    while true {
      errno = 0
      guard let record = readdir(directory) else {
        if errno != 0 { throw TreeHashError(path: path, errno: errno) }
        return entries
      }
      let nameBytes = withUnsafeBytes(of: record.pointee.d_name) { raw in
        Array(raw.prefix(while: { $0 != 0 }))
      }
      if nameBytes == [UInt8(ascii: ".")] || nameBytes == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
      guard let name = String(validating: nameBytes, as: UTF8.self) else {
        throw TreeHashError(path: path, message: "an entry's name is not UTF-8")
      }
      var kind: Kind?
      switch Int32(record.pointee.d_type) {
      case Int32(DT_REG): kind = .file
      case Int32(DT_DIR): kind = .directory
      case Int32(DT_UNKNOWN):
        var status = stat()
        let entryPath = path + "/" + name
        guard lstat(entryPath, &status) == 0 else { throw TreeHashError(path: entryPath, errno: errno) }
        switch status.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        default: kind = nil
        }
      default: kind = nil
      }
      if let kind {
        entries.append(DirectoryEntry(name: name, kind: kind))
      }
    }
  }
}

/// A file or directory that could not be read, and why.
struct TreeHashError: Error, CustomStringConvertible {
  /// The path of the file or directory.
  var path: String
  /// What went wrong.
  var message: String

  /// An error for `path` with the system's message for `code`.
  init(path: String, errno code: Int32) {
    self.init(path: path, message: String(cString: strerror(code)))
  }

  /// An error for `path` with `message`.
  init(path: String, message: String) {
    self.path = path
    self.message = message
  }

  var description: String { "\(path): \(message)" }
}
