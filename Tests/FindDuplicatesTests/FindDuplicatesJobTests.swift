import FindDuplicatesCore
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct FindDuplicatesJobTests {
  @Test func findsSetsInDeterministicOrder() async throws {
    let directory = TemporaryDirectory()
    directory.write("a/one.txt", "same content")
    directory.write("b/two.txt", "same content")
    directory.write("c/three.txt", "same content")
    directory.write("big1", String(repeating: "x", count: 5000))
    directory.write("big2", String(repeating: "x", count: 5000))
    directory.write("unique", "unique content")
    directory.write("samesize", "other conten")  // same size as "same content", different bytes
    let report = try await search([directory.path])
    let expected: [[String]] = [["big1", "big2"], ["a/one.txt", "b/two.txt", "c/three.txt"]]
    #expect(relativeSets(report, in: directory) == expected)
    #expect(report.reclaimableBytes == 5000 + 2 * 12)
    #expect(report.skipped.isEmpty)
  }

  @Test func namesThatAreNotUTF8() async throws {
    let directory = TemporaryDirectory()
    let badFile: [UInt8] = [0x66, 0xFF, 0xFE]  // "f\xff\xfe"
    let badDirectory: [UInt8] = [0x64, 0xE9]  // Latin-1 "dé"
    directory.write(badFile, Array("duplicate".utf8))
    directory.makeDirectory(badDirectory)
    directory.write(badDirectory + Array("/x".utf8), Array("duplicate".utf8))
    directory.write(Array("line\nbreak".utf8), Array("duplicate".utf8))
    let report = try await search([directory.path])
    #expect(report.skipped.isEmpty)
    let set = try #require(report.sets.first)
    #expect(report.sets.count == 1)
    let expected: [[UInt8]] = [
      directory.child(badDirectory + Array("/x".utf8)), directory.child(badFile), directory.child("line\nbreak"),
    ]
    #expect(set.paths == expected)

    // Text: one line per name, escaped. -0: the raw bytes. JSON: base64 of the raw bytes.
    let text = String(decoding: ReportWriter.text(report.sets), as: UTF8.self)
    #expect(text.contains("/d\\xe9/x\n"))
    #expect(text.contains("/f\\xff\\xfe\n"))
    #expect(text.contains("/line\\nbreak\n"))
    var nulSeparated: [UInt8] = []
    for path in set.paths { nulSeparated += path + [0] }
    nulSeparated.append(0)
    #expect(ReportWriter.nulSeparated(report.sets) == nulSeparated)
    let json = try JSONSerialization.jsonObject(with: Data(ReportWriter.json(report).utf8)) as? [String: Any]
    let files = try #require(((json?["sets"] as? [[String: Any]])?.first?["files"]) as? [[String: String]])
    let decoded: [[UInt8]] = files.map { (file: [String: String]) -> [UInt8] in
      if let base64 = file["path_base64"], let data = Data(base64Encoded: base64) { return Array(data) }
      return Array(file["path"]!.utf8)
    }
    #expect(decoded == set.paths)
  }

  @Test func directoryGivenWithNonUTF8Name() async throws {
    let directory = TemporaryDirectory()
    let root: [UInt8] = [0x72, 0x80]
    directory.makeDirectory(root)
    directory.write(root + Array("/a".utf8), Array("12345".utf8))
    directory.write(root + Array("/b".utf8), Array("12345".utf8))
    let report = try await search([directory.child(root)])
    #expect(report.sets.map(\.paths.count) == [2])
  }

  @Test func hardLinksShowTheFirstPathOrAll() async throws {
    let directory = TemporaryDirectory()
    directory.write("m/original", "linked content")
    directory.hardLink("m/original", "a-link")
    directory.write("z/copy", "linked content")
    directory.write("solo", "only hard links")
    directory.hardLink("solo", "solo-link")

    let folded = try await search([directory.path])
    #expect(relativeSets(folded, in: directory) == [["a-link", "z/copy"]])
    #expect(folded.sets[0].reclaimableBytes == 14)

    let listed = try await search([directory.path], listHardLinks: true)
    let expected: [[String]] = [["a-link", "m/original", "z/copy"], ["solo", "solo-link"]]
    #expect(relativeSets(listed, in: directory) == expected)
    #expect(listed.sets.map(\.reclaimableBytes) == [14, 0])
  }

  @Test func severalAndOverlappingRootsCountEachFileOnce() async throws {
    let directory = TemporaryDirectory()
    directory.write("one/a", "content")
    directory.write("one/inner/b", "content")
    directory.write("two/c", "content")
    let report = try await search([directory.child("one"), directory.child("two"), directory.child("one/inner")])
    #expect(relativeSets(report, in: directory) == [["one/a", "one/inner/b", "two/c"]])
  }

  @Test func symbolicLinksAreIgnoredOrFollowedWithoutLooping() async throws {
    let directory = TemporaryDirectory()
    directory.write("real/a", "content")
    directory.write("other/b", "content")
    directory.symbolicLink("../real", "other/link-to-real")
    directory.symbolicLink("..", "real/loop")
    directory.symbolicLink("nowhere", "real/dangling")
    let ignored = try await search([directory.child("other")])
    #expect(ignored.sets.isEmpty)
    #expect(ignored.statistics.specialEntriesIgnored == 1)

    let followed = try await search([directory.child("other")], followSymlinks: true)
    #expect(relativeSets(followed, in: directory) == [["other/b", "other/link-to-real/a"]])
    #expect(followed.skipped.isEmpty)
  }

  @Test func minimumSizeAndEmptyFiles() async throws {
    let directory = TemporaryDirectory()
    directory.write("e1", "")
    directory.write("e2", "")
    directory.write("s1", "ab")
    directory.write("s2", "ab")
    directory.write("l1", "abcd")
    directory.write("l2", "abcd")
    #expect(relativeSets(try await search([directory.path], minimumSize: 3), in: directory) == [["l1", "l2"]])
    let all = try await search([directory.path], minimumSize: 0)
    let expected: [[String]] = [["l1", "l2"], ["s1", "s2"], ["e1", "e2"]]
    #expect(relativeSets(all, in: directory) == expected)
  }

  /// Larger files take the full-hash path (three or more, beyond the first block) or are compared
  /// directly (pairs); a difference in the last byte must split them either way.
  @Test func differenceInTheLastByte() async throws {
    let directory = TemporaryDirectory()
    let content = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    var different = content
    different[different.count - 1] ^= 1
    for name in ["g1", "g2", "g3"] { directory.write(Array(name.utf8), content) }
    directory.write(Array("g4".utf8), different)
    directory.write(Array("p1/x".utf8), content + [1])
    directory.write(Array("p2/x".utf8), different + [1])
    let report = try await search([directory.path])
    #expect(relativeSets(report, in: directory) == [["g1", "g2", "g3"]])
  }

  @Test func deepNesting() async throws {
    let directory = TemporaryDirectory()
    let deep = Array(repeating: "d", count: 200).joined(separator: "/")
    directory.write(deep + "/bottom", "deep")
    directory.write("top", "deep")
    let report = try await search([directory.path])
    #expect(relativeSets(report, in: directory) == [[deep + "/bottom", "top"]])
  }

  @Test func pathTooLongIsReported() async throws {
    let directory = TemporaryDirectory()
    // 20 levels of 250-byte names: past PATH_MAX (4096), so opening by path fails.
    // mkdirat and openat, one level at a time: mkdir of the whole path would fail too.
    var descriptor = withCString(directory.path) { open($0, O_RDONLY | O_DIRECTORY) }
    for _ in 0..<20 {
      mkdirat(descriptor, String(repeating: "n", count: 250), 0o755)
      let next = openat(descriptor, String(repeating: "n", count: 250), O_RDONLY | O_DIRECTORY)
      close(descriptor)
      descriptor = next
    }
    close(descriptor)
    let report = try await search([directory.path])
    #expect(report.skipped.contains { $0.reason == String(cString: strerror(ENAMETOOLONG)) })
  }

  @Test func progressOnlyMovesForward() async throws {
    let directory = TemporaryDirectory()
    for index in 0..<300 {
      directory.write("d\(index % 7)/f\(index)", String(repeating: "v\(index % 40)", count: 1000 + index % 3))
    }
    for index in 0..<4 { directory.write("large\(index)", String(repeating: "L", count: 300_000)) }
    let status = ProgressStatus(recordsHistory: true)
    _ = try await search([directory.path], status: status)
    let history = status.recordedHistory
    #expect(history.last?.phase == .done)
    for (earlier, later) in zip(history, history.dropFirst()) {
      #expect(earlier.phase <= later.phase)
      if earlier.phase == later.phase {
        #expect(earlier.done <= later.done)
        #expect(earlier.filesFound <= later.filesFound)
        #expect((earlier.percent ?? 0) <= (later.percent ?? 0))
      }
      #expect(later.done <= later.total)
    }
    let phases = Set(history.map(\.phase))
    let expected: Set<ProgressStatus.Phase> = [.scanning, .firstBlocks, .hashing, .comparing]
    #expect(phases.isSuperset(of: expected))
  }

  @Test(arguments: [20, 60, 80, 200])
  func progressLineFitsTheWidth(width: Int) {
    var snapshot = ProgressStatus.Snapshot()
    snapshot.filesFound = 123_456_789
    snapshot.directoriesScanned = 9_876_543
    for phase in ProgressStatus.Phase.allCases {
      snapshot.phase = phase
      snapshot.total = 999_999_999_999
      snapshot.done = 555_555_555_555
      let line = ProgressLine.text(for: snapshot, width: width)
      #expect(line.count <= width - 1)
      #expect(line.allSatisfy { $0.isASCII && $0 != "\n" })
    }
  }
}
