import FindDuplicatesCore
import Foundation
import Glibc
import Testing

/// One file (device and inode) reached through several roots or spellings of its path is one
/// file with one name: never its own duplicate, never its own hard link, with or without -H and
/// -L. Different names of one file (hard links) are listed with -H only.
@Suite(.timeLimit(.minutes(1))) struct SameFileTests {
  /// The roots, relative to the temporary directory: the directory `single` and its one file
  /// spelled in other ways, a root given twice, a symbolic link to the directory.
  @Test(arguments: [
    ["single", "single/./only"], ["single", "./single/only"], ["single/only", "single//only"],
    ["single", "alias/only"], ["alias", "single"], ["single/only", "single/../single/only", "alias/../single/only"],
  ])
  func oneFileReachedTwiceIsNoSet(roots: [String]) async throws {
    let directory = TemporaryDirectory()
    directory.write("single/only", "the only file")
    directory.symbolicLink("single", "alias")
    let paths = roots.map { directory.child($0) }
    for (listHardLinks, followSymlinks) in [(false, false), (true, false), (false, true), (true, true)] {
      let report = try await search(paths, followSymlinks: followSymlinks, listHardLinks: listHardLinks)
      #expect(report.sets.isEmpty, "-H \(listHardLinks) -L \(followSymlinks)")
      #expect(report.statistics.hardLinks == 0)
    }
  }

  /// `dir/X`, its hard link `dir/hard`, a symbolic link `dir/link` to `X`, and a copy: -H lists
  /// the two names of the file and the copy; -L adds no name (the link names `X`), and the roots
  /// `dir` and `dir/X` name `X` once.
  @Test func hardLinksAreNamesSymbolicLinksAndRepeatsAreNot() async throws {
    let directory = TemporaryDirectory()
    directory.write("dir/X", "linked")
    directory.hardLink("dir/X", "dir/hard")
    directory.symbolicLink("X", "dir/link")
    directory.write("copy", "linked")
    let roots = [directory.child("dir"), directory.child("dir/./X"), directory.child("copy")]
    for followSymlinks in [false, true] {
      let listed = try await search(roots, followSymlinks: followSymlinks, listHardLinks: true)
      #expect(relativeSets(listed, in: directory) == [["copy", "dir/./X", "dir/hard"]], "-L \(followSymlinks)")
      #expect(listed.statistics.hardLinks == 1)
      let folded = try await search(roots, followSymlinks: followSymlinks)
      #expect(relativeSets(folded, in: directory) == [["copy", "dir/./X"]])
      #expect(folded.statistics.hardLinks == 1)
    }
    // Only the hard links: a set with -H, none without.
    let links = [directory.child("dir"), directory.child("dir/X")]
    #expect(relativeSets(try await search(links, listHardLinks: true), in: directory) == [["dir/X", "dir/hard"]])
    #expect(try await search(links, followSymlinks: true).sets.isEmpty)
  }
}
