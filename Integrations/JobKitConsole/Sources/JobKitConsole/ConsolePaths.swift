import JobKitPostgres

/// The console's URLs under the prefix it was mounted at.
struct ConsolePaths: Sendable, Equatable {
  /// `""` for the root, else `/something` without a trailing slash.
  let prefix: String

  init(prefix: String) {
    let trimmed = prefix.split(separator: "/").joined(separator: "/")
    self.prefix = trimmed.isEmpty ? "" : "/" + trimmed
  }

  var dashboard: String { prefix.isEmpty ? "/" : prefix }
  var script: String { prefix + "/console.js" }
  var styleSheet: String { prefix + "/console.css" }

  func task(_ id: Int64) -> String { prefix + "/tasks/\(id)" }

  func action(_ action: String, task id: Int64) -> String { prefix + "/tasks/\(id)/\(action)" }

  /// `pause` or `resume` of the queue named in the form.
  func queueAction(_ action: String) -> String { prefix + "/queues/\(action)" }

  /// The list of tasks that `filter` selects, from `cursor` on.
  func tasks(_ filter: RemoteQueue.TaskFilter = .init(), after cursor: RemoteQueue.TaskCursor? = nil) -> String {
    let items: [(String, String?)] = [
      ("queue", filter.queue), ("kind", filter.kind), ("state", filter.state), ("key", filter.keyPrefix),
      ("field", filter.inputField), ("value", filter.inputValue), ("after", cursor?.parameter),
    ]
    let query = items.compactMap { name, value in value.map { "\(name)=\(Self.percentEncoded($0))" } }
    return prefix + "/tasks" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
  }

  /// `text` with every byte but unreserved ones (`A-Z a-z 0-9 - . _ ~`) percent-encoded.
  static func percentEncoded(_ text: String) -> String {
    var result = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        result += (byte < 16 ? "%0" : "%") + String(byte, radix: 16, uppercase: true)
      }
    }
    return result
  }
}

extension RemoteQueue.TaskCursor {
  /// The cursor as a URL parameter: `MICROSECONDS.ID`.
  var parameter: String { "\(createdMicroseconds).\(id)" }

  /// Reads a cursor from its URL parameter (`MICROSECONDS.ID`), `nil` if it is not one.
  init?(parameter: String) {
    let parts = parameter.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 2, let created = Int64(parts[0]), let id = Int64(parts[1]) else { return nil }
    self.init(createdMicroseconds: created, id: id)
  }
}
