import Glibc

/// Which name a path reaches a file by: the directory that holds the name (device and inode) and
/// the name in it.
///
/// Paths that spell one name differently have one identity: `X`, `./X`, `dir/../X`, `/abs/dir/X`
/// and `dir/X` (from `/abs`), a name reached through a symbolic link to its directory, and, with
/// `-L`, a symbolic link to the file itself (it stands for the name it resolves to). Hard links
/// are different names: they differ in their directory or their name. So a file reached twice
/// through overlapping arguments is not its own hard link, with or without `-H` and `-L`.
///
/// Found with `lstat` on the path (and `realpath` if it is a symbolic link) and `stat` on its
/// directory: the job asks only for files with several paths, which are rare.
struct NameIdentity: Hashable {
  /// The device and inode of the directory that holds the name.
  var directory: FileID
  /// The last component of the path.
  var name: [UInt8]

  /// The identity of `path`, or `nil` if the path no longer names anything.
  init?(path: some Collection<UInt8>) {
    var resolved = Array(path)
    var status = stat()
    guard Self.withCString(resolved, { lstat($0, &status) }) == 0 else { return nil }
    if status.st_mode & S_IFMT == S_IFLNK {
      guard let real = Self.withCString(resolved, { realpath($0, nil) }) else { return nil }
      defer { free(real) }
      resolved = Array(UnsafeRawBufferPointer(start: real, count: strlen(real)))
    }
    let slash = UInt8(ascii: "/")
    let directory: [UInt8]
    if let last = resolved.lastIndex(of: slash) {
      name = Array(resolved[(last + 1)...])
      directory = last == 0 ? [slash] : Array(resolved[..<last])
    } else {
      name = resolved
      directory = [UInt8(ascii: ".")]
    }
    guard Self.withCString(directory, { stat($0, &status) }) == 0 else { return nil }
    self.directory = FileID(status)
  }

  private static func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
    (bytes + [0]).withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
    }
  }
}
