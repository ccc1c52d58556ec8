import FindDuplicatesCore
import Foundation
import Glibc
import Testing

/// A file that changes during the search is never reported on stale data: it is listed as
/// changed and left out of the sets. The change happens at a fixed moment, set by a
/// ``SearchHooks`` hook, not by timing.
@Suite(.timeLimit(.minutes(1))) struct ChangedFileTests {
  /// `count` identical files of `size` bytes; file `grown` grows between the hashes and the
  /// comparison (which reads only the size the scan found, so without the re-check the grown
  /// file would still compare equal).
  @Test(arguments: [
    (2, 100, 0), (2, 100, 1), (3, 100, 1), (3, 100_000, 0), (3, 100_000, 2), (4, 20_000, 3),
  ])
  func aFileGrownBeforeTheComparisonIsLeftOut(count: Int, size: Int, grown: Int) async throws {
    let directory = TemporaryDirectory()
    let content = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let names = (0..<count).map { "f\($0)" }
    for name in names { directory.write(Array(name.utf8), content) }
    let grownName = names[grown]
    let once = Once()
    var hooks = SearchHooks()
    // The writer: grows the file once every hash is known, before any comparison starts.
    hooks.beforeComparing = { if once.claim() { directory.append(grownName, Array("more".utf8)) } }
    let report = try await search([directory.path], hooks: hooks)
    let rest = names.filter { $0 != grownName }
    #expect(relativeSets(report, in: directory) == (rest.count >= 2 ? [rest] : []))
    #expect(
      report.skipped == [
        SkippedItem(path: directory.child(grownName), reason: "changed during the search", changed: true)
      ])
  }

  /// A file rewritten in place (same size, same inode) just after its bytes were compared, before
  /// the re-check: the bytes compared are no longer its content. `position` 0 is the reference
  /// the others were compared with; with three files, the other two still equal each other.
  @Test(arguments: [(2, 0), (2, 1), (3, 0), (3, 2)])
  func aFileRewrittenWhileComparedIsLeftOut(count: Int, position: Int) async throws {
    let directory = TemporaryDirectory()
    let content = Array(repeating: UInt8(ascii: "s"), count: 5000)
    let names = (0..<count).map { "f\($0)" }
    for name in names {
      directory.write(Array(name.utf8), content)
      directory.age(name)
    }
    let once = Once()
    let rewritten = LockedPath()
    var hooks = SearchHooks()
    hooks.afterComparingBytes = { paths in
      guard once.claim(), position < paths.count else { return }
      let name = String(decoding: paths[position].dropFirst(directory.path.count + 1), as: UTF8.self)
      rewritten.set(name)
      directory.overwrite(name, Array(repeating: UInt8(ascii: "t"), count: 5000))
    }
    let report = try await search([directory.path], hooks: hooks)
    let changed = try #require(rewritten.get())
    let rest = names.filter { $0 != changed }
    #expect(relativeSets(report, in: directory) == (rest.count >= 2 ? [rest] : []))
    #expect(
      report.skipped == [
        SkippedItem(path: directory.child(changed), reason: "changed during the search", changed: true)
      ])
    let errors = ReportWriter.standardError(report, format: .text)
    #expect(
      errors
        == "Skipped 1 file that changed during the search:\n  \(directory.child(changed).string): changed during the search\n"
    )
  }

  /// Empty files (--min-size 0) are not read: one that is no longer empty when the report is
  /// made is left out too. The hook fires before the non-empty pair is compared.
  @Test func anEmptyFileThatGrewIsLeftOut() async throws {
    let directory = TemporaryDirectory()
    for name in ["e1", "e2", "e3"] { directory.write(name, "") }
    for name in ["l1", "l2"] { directory.write(name, "pair") }
    var configuration = FindDuplicatesJob.Configuration(roots: [directory.path], minimumSize: 0)
    let once = Once()
    configuration.hooks.beforeComparing = { if once.claim() { directory.append("e1", Array("grown".utf8)) } }
    let job = FindDuplicatesJob(configuration: configuration)
    try await job.run()
    let report = try #require(job.report)
    #expect(relativeSets(report, in: directory) == [["l1", "l2"], ["e2", "e3"]])
    #expect(report.skipped.map(\.path) == [directory.child("e1")])
  }

  /// Files that nothing changes are all reported, and re-checked only when compared.
  @Test func unchangedFilesAreReported() async throws {
    let directory = TemporaryDirectory()
    for name in ["a", "b", "c"] { directory.write(name, "same") }
    let report = try await search([directory.path], hooks: SearchHooks())
    #expect(relativeSets(report, in: directory) == [["a", "b", "c"]])
    #expect(report.skipped.isEmpty)
  }
}

/// A path set once from a hook's thread and read by the test.
final class LockedPath: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched under `lock`.
  private let lock = NSLock()
  private var value: String?

  func set(_ new: String) { lock.withLock { value = new } }
  func get() -> String? { lock.withLock { value } }
}

extension [UInt8] {
  var string: String { String(decoding: self, as: UTF8.self) }
}
