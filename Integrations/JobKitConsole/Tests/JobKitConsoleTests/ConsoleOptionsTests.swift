import Testing

@testable import JobKitConsole

@Suite struct ConsoleOptionsTests {
  static let url = "postgres://console:pa55word@db.example/jobs"
  var url: String { Self.url }

  @Test func defaultsToLoopbackAndReadOnly() throws {
    let options = try ConsoleOptions.parse(["--database", url], environment: [:])
    #expect(options == ConsoleOptions(database: url, host: "127.0.0.1", port: 8080, token: nil))
  }

  @Test func readsListenAndTokenInBothSpellings() throws {
    let options = try ConsoleOptions.parse(
      ["--listen=0.0.0.0:9090", "--database=\(url)", "--token", "t"], environment: [:])
    #expect(options == ConsoleOptions(database: url, host: "0.0.0.0", port: 9090, token: "t"))
  }

  @Test func theTokenMayComeFromTheEnvironmentAndTheFlagWins() throws {
    let environment = [ConsoleOptions.tokenVariable: "from-env"]
    #expect(try ConsoleOptions.parse(["--database", url], environment: environment).token == "from-env")
    #expect(
      try ConsoleOptions.parse(["--database", url, "--token", "flag"], environment: environment).token == "flag")
  }

  @Test(arguments: [
    ("127.0.0.1:8080", "127.0.0.1", 8080),
    ("localhost:0", "localhost", 0),
    ("[::1]:8443", "::1", 8443),
  ])
  func parsesListenAddresses(text: String, host: String, port: Int) throws {
    let parsed = try ConsoleOptions.parseListen(text)
    #expect(parsed.host == host)
    #expect(parsed.port == port)
  }

  @Test(arguments: ["8080", ":8080", "host:", "host:http", "host:70000", "::1:80", "[::1]8080", "[::1]"])
  func refusesBadListenAddresses(text: String) {
    #expect(throws: ConsoleOptionsError.self) { try ConsoleOptions.parseListen(text) }
  }

  @Test(arguments: [
    [String](), ["--database"], ["--database", Self.url, "--port", "1"], ["--listen", "h:1"], ["stray"],
  ])
  func refusesBadCommandLinesWithoutRepeatingThePassword(arguments: [String]) {
    do {
      _ = try ConsoleOptions.parse(arguments, environment: [:])
      Issue.record("parsed \(arguments.count) arguments")
    } catch {
      #expect(!"\(error)".contains("pa55word"))
      #expect("\(error)".contains("usage: jobkit-console"))
    }
  }
}

@Suite struct HostAllowlistTests {
  @Test func theLoopbackNamesPassWithAnyPortAndOthersDoNot() {
    let allowlist = HostAllowlist(HostAllowlist.loopback)
    for host in ["localhost", "LOCALHOST:8080", "127.0.0.1:9", "[::1]:8443", "[::1]", "localhost"] {
      #expect(allowlist.allows(host: host), "\(host)")
    }
    for host in ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.2", "[::2]:80", "0.0.0.0"] {
      #expect(!allowlist.allows(host: host), "\(host)")
    }
    // No Host: nothing to check.
    #expect(allowlist.allows(host: nil))
  }

  @Test func namesAddedPassCaseAndBracketsAside() {
    let allowlist = HostAllowlist(HostAllowlist.loopback + ["Jobs.Example.COM", "[fd00::1]"])
    #expect(allowlist.allows(host: "jobs.example.com:443"))
    #expect(allowlist.allows(host: "[FD00::1]:8080"))
    #expect(!allowlist.allows(host: "example.com"))
  }

  @Test func allowHostFlagsAddNames() throws {
    let options = try ConsoleOptions.parse(
      ["--database", ConsoleOptionsTests.url, "--allow-host", "a.example", "--allow-host=b.example"], environment: [:])
    #expect(options.allowedHosts == ["a.example", "b.example"])
    #expect(try ConsoleOptions.parse(["--database", ConsoleOptionsTests.url], environment: [:]).allowedHosts == [])
  }
}
