/// A piece of HTML, escaped by construction: every value interpolated into an `HTML` literal
/// goes through ``escape(_:)``; only another `HTML` is inserted as it is.
///
/// ```swift
/// let row: HTML = "<td>\(task.idempotencyKey)</td>"   // the key is escaped
/// let page: HTML = "<tr>\(row)</tr>"                   // the row is inserted as HTML
/// ```
public struct HTML: Sendable, Equatable, ExpressibleByStringInterpolation {
  /// The markup.
  public let rendered: String

  /// Markup written in the source (a literal without values is trusted as it is).
  public init(stringLiteral value: String) {
    rendered = value
  }

  /// Markup with values: each value escaped, each `HTML` inserted.
  public init(stringInterpolation: StringInterpolation) {
    rendered = stringInterpolation.output
  }

  /// Several pieces one after the other.
  public init(joining pieces: some Sequence<HTML>) {
    rendered = pieces.map(\.rendered).joined()
  }

  /// The text `text` as HTML: `&`, `<`, `>`, `"` and `'` replaced by their character
  /// references, so that it shows as text in an element and in a quoted attribute. The one
  /// escaping function of the console: every key, input, output, error and name goes through it.
  public static func escape(_ text: String) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for character in text.unicodeScalars {
      switch character {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      case "'": result += "&#39;"
      default: result.unicodeScalars.append(character)
      }
    }
    return result
  }

  /// The interpolation that escapes values.
  public struct StringInterpolation: StringInterpolationProtocol {
    var output = ""

    /// Room for the literal parts.
    public init(literalCapacity: Int, interpolationCount: Int) {
      output.reserveCapacity(literalCapacity + interpolationCount * 16)
    }

    /// A literal part, as written.
    public mutating func appendLiteral(_ literal: String) {
      output += literal
    }

    /// Markup, inserted as it is.
    public mutating func appendInterpolation(_ html: HTML) {
      output += html.rendered
    }

    /// Pieces of markup, one after the other.
    public mutating func appendInterpolation(_ pieces: [HTML]) {
      for piece in pieces { output += piece.rendered }
    }

    /// A value, escaped (its `description`).
    public mutating func appendInterpolation(_ value: some CustomStringConvertible) {
      output += HTML.escape(value.description)
    }
  }
}
