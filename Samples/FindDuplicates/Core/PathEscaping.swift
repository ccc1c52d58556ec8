import Foundation

/// How `find-duplicates` shows file names, which on Linux are any bytes but `/` and NUL.
///
/// **Text output** (``escapedForTerminal(_:)``): valid UTF-8 is printed as it is, except
/// - `\` is printed as `\\`;
/// - newline, tab and carriage return as `\n`, `\t`, `\r`;
/// - other control characters (U+0000–U+001F, U+007F–U+009F) as `\xHH`, one per UTF-8 byte;
/// - every byte that is not part of valid UTF-8 as `\xHH`.
///
/// So a printed name is always one line, and the bytes of the name can be recovered from it
/// (it is the escaping of `printf '%b'`). `-0` prints the raw bytes instead, and JSON gives the
/// raw bytes in base64 when they are not UTF-8 (``jsonFields(_:)``).
public enum PathEscaping {
  /// `bytes` escaped for a line of text output.
  public static func escapedForTerminal(_ bytes: some Collection<UInt8>) -> String {
    if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\\") }) {
      return String(decoding: bytes, as: UTF8.self)
    }
    var output = ""
    var iterator = bytes.makeIterator()
    var parser = Unicode.UTF8.ForwardParser()
    var remaining = bytes[...]
    while true {
      switch parser.parseScalar(from: &iterator) {
      case .valid(let encoded):
        let scalar = Unicode.UTF8.decode(encoded)
        let count = encoded.count
        defer { remaining = remaining.dropFirst(count) }
        switch scalar.value {
        case 0x5C: output += "\\\\"
        case 0x0A: output += "\\n"
        case 0x09: output += "\\t"
        case 0x0D: output += "\\r"
        case 0x00..<0x20, 0x7F..<0xA0:
          for byte in remaining.prefix(count) { output += hexEscape(byte) }
        default: output.unicodeScalars.append(scalar)
        }
      case .error(let length):
        for byte in remaining.prefix(length) { output += hexEscape(byte) }
        remaining = remaining.dropFirst(length)
      case .emptyInput:
        return output
      }
    }
  }

  /// Whether `bytes` are valid UTF-8.
  public static func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
    var iterator = bytes.makeIterator()
    var parser = Unicode.UTF8.ForwardParser()
    while true {
      switch parser.parseScalar(from: &iterator) {
      case .valid: continue
      case .error: return false
      case .emptyInput: return true
      }
    }
  }

  /// The JSON members that name a file: `"path": "…"` always (the name itself when it is UTF-8,
  /// otherwise the name with each invalid byte replaced by U+FFFD, for display), followed by
  /// `"path_base64": "…"`, the raw bytes in base64, only when the name is not valid UTF-8.
  public static func jsonFields(_ bytes: some Collection<UInt8>) -> String {
    let text = String(decoding: bytes, as: UTF8.self)
    var fields = "\"path\":" + jsonString(text)
    if !isValidUTF8(bytes) {
      fields += ",\"path_base64\":\"" + Data(bytes).base64EncodedString() + "\""
    }
    return fields
  }

  /// `text` as a JSON string literal, with quotes.
  public static func jsonString(_ text: String) -> String {
    var output = "\""
    for scalar in text.unicodeScalars {
      switch scalar.value {
      case 0x22: output += "\\\""
      case 0x5C: output += "\\\\"
      case 0x0A: output += "\\n"
      case 0x09: output += "\\t"
      case 0x0D: output += "\\r"
      case 0x00..<0x20, 0x7F, 0x2028, 0x2029:
        output +=
          "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
          + String(scalar.value, radix: 16)
      default: output.unicodeScalars.append(scalar)
      }
    }
    return output + "\""
  }

  private static let hexDigits = Array("0123456789abcdef")

  private static func hexEscape(_ byte: UInt8) -> String {
    "\\x" + String(hexDigits[Int(byte >> 4)]) + String(hexDigits[Int(byte & 0xF)])
  }
}
