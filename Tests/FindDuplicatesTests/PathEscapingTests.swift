import FindDuplicatesCore
import Foundation
import Testing

@Suite struct PathEscapingTests {
  @Test(arguments: [
    (Array("plain/name.txt".utf8), "plain/name.txt"),
    (Array("caf\u{E9}/\u{65E5}\u{672C}".utf8), "caf\u{E9}/\u{65E5}\u{672C}"),
    (Array("two\nlines".utf8), "two\\nlines"),
    (Array("tab\there\r".utf8), "tab\\there\\r"),
    (Array("back\\slash".utf8), "back\\\\slash"),
    ([0x61, 0xFF, 0x62], "a\\xffb"),
    ([0xC3, 0x28], "\\xc3("),
    ([0x1B, 0x5B, 0x41], "\\x1b[A"),
    ([0xC2, 0x85], "\\xc2\\x85"),
  ])
  func escapesForText(bytes: [UInt8], expected: String) {
    #expect(PathEscaping.escapedForTerminal(bytes) == expected)
  }

  @Test func validUTF8NameHasNoBase64() {
    #expect(PathEscaping.jsonFields(Array("a \"b\"\n".utf8)) == #""path":"a \"b\"\n""#)
  }

  @Test func invalidNameCarriesItsBytes() throws {
    let bytes: [UInt8] = [0x61, 0xFF, 0x0A]
    let object = try JSONSerialization.jsonObject(with: Data(("{" + PathEscaping.jsonFields(bytes) + "}").utf8))
    let fields = try #require(object as? [String: String])
    #expect(fields["path"] == "a\u{FFFD}\n")
    #expect(fields["path_base64"].flatMap { Data(base64Encoded: $0) } == Data(bytes))
  }
}
