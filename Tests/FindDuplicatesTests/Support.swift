import FindDuplicatesCore
import Foundation
import Glibc
import Testing

/// A temporary directory for a test's files, named and filled with raw path bytes (so names
/// that are not UTF-8 can be made), removed when released.
final class TemporaryDirectory: @unchecked Sendable {
  // @unchecked Sendable: `path` never changes; the file system is the only shared state.
  let path: [UInt8]

  init() {
    var template = Array("/tmp/find-duplicates-tests.XXXXXX".utf8CString)
    let result = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    precondition(result != nil, "mkdtemp failed")
    path = template.dropLast().map { UInt8(bitPattern: $0) }
  }

  deinit {
    // The root's own name is ASCII; `rm` removes names that are not UTF-8 below it.
    let remover = Process()
    remover.executableURL = URL(fileURLWithPath: "/bin/rm")
    remover.arguments = ["-rf", String(decoding: path, as: UTF8.self)]
    try? remover.run()
    remover.waitUntilExit()
  }

  /// `path` + `/` + `relative`.
  func child(_ relative: [UInt8]) -> [UInt8] {
    path + [UInt8(ascii: "/")] + relative
  }

  func child(_ relative: String) -> [UInt8] {
    child(Array(relative.utf8))
  }

  /// Writes `contents` to `relative`, making the directories above it.
  @discardableResult
  func write(_ relative: [UInt8], _ contents: [UInt8]) -> [UInt8] {
    var parent = path
    let components = relative.split(separator: UInt8(ascii: "/"))
    for component in components.dropLast() {
      parent += [UInt8(ascii: "/")] + component
      _ = withCString(parent) { mkdir($0, 0o755) }
    }
    let file = child(relative)
    let descriptor = withCString(file) { open($0, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    precondition(descriptor >= 0, "cannot create \(String(decoding: file, as: UTF8.self))")
    contents.withUnsafeBytes { _ = Glibc.write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
    return file
  }

  @discardableResult
  func write(_ relative: String, _ contents: String) -> [UInt8] {
    write(Array(relative.utf8), Array(contents.utf8))
  }

  /// Makes a sparse file of `size` bytes (reads as zeros, takes no space).
  func sparse(_ relative: String, size: Int64) {
    let file = write(Array(relative.utf8), [])
    _ = withCString(file) { truncate($0, off_t(size)) }
  }

  func makeDirectory(_ relative: [UInt8]) {
    _ = withCString(child(relative)) { mkdir($0, 0o755) }
  }

  func hardLink(_ existing: String, _ new: String) {
    _ = withCString(child(existing)) { old in withCString(child(new)) { link(old, $0) } }
  }

  func symbolicLink(_ target: String, _ new: String) {
    _ = withCString(Array(target.utf8)) { old in withCString(child(new)) { symlink(old, $0) } }
  }
}

func withCString<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
  (bytes + [0]).withUnsafeBufferPointer { buffer in
    buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
  }
}

/// Runs a search and returns its report.
func search(
  _ roots: [[UInt8]], minimumSize: Int64 = 1, followSymlinks: Bool = false, listHardLinks: Bool = false,
  status: ProgressStatus = ProgressStatus()
) async throws -> DuplicateReport {
  let job = FindDuplicatesJob(
    configuration: .init(
      roots: roots, minimumSize: minimumSize, followSymlinks: followSymlinks, listHardLinks: listHardLinks),
    status: status)
  try await job.run()
  return try #require(job.report)
}

/// The sets of `report` as sets of paths relative to `directory`, as strings (lossy).
func relativeSets(_ report: DuplicateReport, in directory: TemporaryDirectory) -> [[String]] {
  report.sets.map { set in
    set.paths.map { String(decoding: $0.dropFirst(directory.path.count + 1), as: UTF8.self) }
  }
}

/// Runs `body` on a thread of its own and returns its result: tests block there (on pipes and
/// semaphores), never on the threads Swift concurrency and OperationQueue share.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    Thread { continuation.resume(returning: body()) }.start()
  }
}

/// A flag that is set once, from any thread.
final class Once: @unchecked Sendable {
  // @unchecked Sendable: `done` is only touched under `lock`.
  private let lock = NSLock()
  private var done = false

  /// `true` the first time only.
  func claim() -> Bool {
    lock.withLock {
      defer { done = true }
      return !done
    }
  }
}

extension TemporaryDirectory {
  /// Sets the modification time of `relative` to 2001-09-09, so that a later write changes it
  /// even on a file system whose clock ticks coarsely.
  func age(_ relative: String) {
    var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
    _ = withCString(child(relative)) { utimensat(AT_FDCWD, $0, &times, 0) }
  }

  /// Appends `bytes` to `relative`.
  func append(_ relative: String, _ bytes: [UInt8]) {
    let descriptor = withCString(child(relative)) { open($0, O_WRONLY | O_APPEND) }
    precondition(descriptor >= 0, "cannot open \(relative)")
    bytes.withUnsafeBytes { _ = Glibc.write(descriptor, $0.baseAddress, $0.count) }
    close(descriptor)
  }

  /// Overwrites `relative` in place (same inode, same size) with `bytes`.
  func overwrite(_ relative: String, _ bytes: [UInt8]) {
    let descriptor = withCString(child(relative)) { open($0, O_WRONLY) }
    precondition(descriptor >= 0, "cannot open \(relative)")
    bytes.withUnsafeBytes { _ = pwrite(descriptor, $0.baseAddress, $0.count, 0) }
    close(descriptor)
  }
}

/// Runs a search with `hooks` and returns its report.
func search(_ roots: [[UInt8]], hooks: SearchHooks) async throws -> DuplicateReport {
  var configuration = FindDuplicatesJob.Configuration(roots: roots)
  configuration.hooks = hooks
  let job = FindDuplicatesJob(configuration: configuration)
  try await job.run()
  return try #require(job.report)
}
