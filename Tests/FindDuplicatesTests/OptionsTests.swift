import FindDuplicatesCore
import Testing

@Suite struct OptionsTests {
  private func parse(_ arguments: [String]) throws -> Options {
    guard case .run(let options) = try Options.parse(arguments.map { Array($0.utf8) }) else {
      throw UsageError("expected options")
    }
    return options
  }

  @Test(arguments: [
    ("0", 0 as Int64), ("100", 100), ("1k", 1024), ("4K", 4096), ("1.5M", 1_572_864), ("2GiB", 2_147_483_648),
    ("10KB", 10240), ("7B", 7), ("1t", 1_099_511_627_776),
  ])
  func sizeUnits(text: String, bytes: Int64) throws {
    #expect(try parse(["--min-size", text]).minimumSize == bytes)
    #expect(try parse(["--min-size=\(text)"]).minimumSize == bytes)
  }

  @Test(arguments: ["", "-1", "k", "1x", "12 MBs", "99999999999999999999"])
  func badSizes(text: String) {
    #expect(throws: UsageError.self) { try parse(["--min-size", text]) }
  }

  @Test func flagsAndSeveralRoots() throws {
    let options = try parse(["-0", "-H", "-L", "-q", "a", "b", "--", "-c"])
    #expect(options.format == .nulSeparated)
    #expect(options.listHardLinks && options.followSymlinks && options.quiet)
    #expect(options.roots == [Array("a".utf8), Array("b".utf8), Array("-c".utf8)])
    #expect(try parse(["--json"]).format == .json)
    #expect(try parse([]).roots == [Array(".".utf8)])
  }

  @Test func rawBytesStayRaw() throws {
    guard case .run(let options) = try Options.parse([[0x64, 0xFF]]) else {
      Issue.record("expected options")
      return
    }
    #expect(options.roots == [[0x64, 0xFF]])
  }

  @Test func timelineFile() throws {
    #expect(try parse(["--timeline", "run.html", "dir"]).timelinePath == "run.html")
    #expect(try parse(["--timeline=trace.json"]).timelinePath == "trace.json")
    #expect(try parse(["dir"]).timelinePath == nil)
    #expect(throws: UsageError.self) { try parse(["--timeline"]) }
  }

  @Test func unknownOptionAndHelp() throws {
    #expect(throws: UsageError.self) { try parse(["--frobnicate"]) }
    #expect(try Options.parse([Array("--help".utf8)]) == .help)
  }
}

@Suite struct RootArgumentTests {
  @Test func aMissingRootIsNamedQuoted() {
    #expect(Options.problem(withRoot: []) == UsageError("'': No such file or directory"))
    #expect(
      Options.problem(withRoot: Array("/no/such/dir".utf8)) == UsageError("'/no/such/dir': No such file or directory"))
    #expect(Options.problem(withRoot: [0x2F, 0x6E, 0xFF]) == UsageError("'/n\\xff': No such file or directory"))
  }

  @Test func directoriesAndFilesAreRootsOthersAreNot() {
    #expect(Options.problem(withRoot: Array("/tmp".utf8)) == nil)
    #expect(Options.problem(withRoot: Array("/etc/hostname".utf8)) == nil)
    #expect(
      Options.problem(withRoot: Array("/dev/null".utf8)) == UsageError("'/dev/null': not a directory or regular file"))
  }
}
