import Testing

@testable import JobKitConsole

@Suite struct ActionGuardTests {
  let guarded = ActionGuard(token: "s3cret")

  @Test func theRightTokenFromTheSameOriginActs() {
    #expect(
      guarded.check(token: "s3cret", origin: "http://127.0.0.1:8080", fetchSite: nil, host: "127.0.0.1:8080")
        == .allowed)
    #expect(
      guarded.check(token: "s3cret", origin: "https://console.example", fetchSite: nil, host: "console.example")
        == .allowed)
    #expect(guarded.check(token: "s3cret", origin: nil, fetchSite: "same-origin", host: "h:1") == .allowed)
    // Neither header: no browser sent it (curl, a script); the token decides.
    #expect(guarded.check(token: "s3cret", origin: nil, fetchSite: nil, host: nil) == .allowed)
  }

  @Test(arguments: [nil, "", "s3cre", "s3cret ", "S3CRET"])
  func aMissingOrWrongTokenIsRefused(token: String?) {
    #expect(guarded.check(token: token, origin: nil, fetchSite: nil, host: "h") == .badToken)
  }

  @Test(arguments: [
    ("http://evil.example", "127.0.0.1:8080"),
    ("http://127.0.0.1:8081", "127.0.0.1:8080"),
    ("null", "127.0.0.1:8080"),
    ("http://127.0.0.1:8080/path", "127.0.0.1:8080"),
    ("http://127.0.0.1:8080", ""),
  ])
  func anotherOriginIsRefusedEvenWithTheToken(origin: String, host: String) {
    #expect(guarded.check(token: "s3cret", origin: origin, fetchSite: nil, host: host) == .crossSite)
  }

  @Test(arguments: ["cross-site", "same-site", "none"])
  func aCrossSiteFetchIsRefused(site: String) {
    #expect(guarded.check(token: "s3cret", origin: nil, fetchSite: site, host: "h") == .crossSite)
  }

  @Test func originPortsDefaultByScheme() {
    #expect(ActionGuard.origin("http://Console.Example", isHost: "console.example:80"))
    #expect(ActionGuard.origin("https://console.example:443", isHost: "console.example"))
    #expect(!ActionGuard.origin("http://console.example", isHost: "console.example:8080"))
  }

  @Test(arguments: [nil, ""])
  func withoutATokenTheConsoleIsReadOnly(token: String?) {
    let readOnly = ActionGuard(token: token)
    #expect(readOnly.isReadOnly)
    #expect(readOnly.check(token: "anything", origin: nil, fetchSite: nil, host: "h") == .readOnly)
    #expect(readOnly.check(token: nil, origin: "http://h", fetchSite: nil, host: "h") == .readOnly)
  }

  @Test func formFieldsAreDecoded() {
    let fields = RemoteConsole.formFields("token=a%2Bb+c&action=retry&empty=&token2")
    #expect(fields["token"] == "a+b c")
    #expect(fields["action"] == "retry")
    #expect(fields["empty"] == "")
    #expect(fields["token2"] == "")
  }
}
