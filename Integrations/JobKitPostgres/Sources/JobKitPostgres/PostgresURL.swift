import Foundation
import PostgresNIO

/// A connection URL that could not be used. Its message never contains the URL's password.
///
/// Match on ``code``; two errors are equal when their codes are equal, whatever their
/// ``message``.
public struct PostgresURLError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What is wrong with the URL. Compare codes with `==`, or match the static members.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    /// The code's name; codes are equal when their names are.
    private let name: String

    init(name: String) {
      self.name = name
    }

    /// Not a URL at all.
    public static let notAURL = Code(name: "notAURL")
    /// A scheme other than `postgres://` or `postgresql://`.
    public static let unsupportedScheme = Code(name: "unsupportedScheme")
    /// A query parameter this reader does not know.
    public static let unsupportedParameter = Code(name: "unsupportedParameter")
    /// No user name.
    public static let missingUser = Code(name: "missingUser")
    /// No host and no socket directory.
    public static let missingHost = Code(name: "missingHost")
    /// A port that is not a number from 1 to 65535.
    public static let invalidPort = Code(name: "invalidPort")
    /// An `sslmode` this reader does not support, or TLS asked of a unix socket.
    public static let unsupportedSSLMode = Code(name: "unsupportedSSLMode")
    /// An `sslrootcert` that is not a readable file.
    public static let unreadableRootCertificate = Code(name: "unreadableRootCertificate")

    /// The code's name, for example `invalidPort`.
    public var description: String { name }
  }

  /// What is wrong.
  public let code: Code
  /// What is wrong, with the password (if any) left out.
  public let message: String

  /// An error with `code` and `message`.
  public init(_ code: Code, message: String) {
    self.code = code
    self.message = message
  }

  /// Two errors are equal when their codes are equal; the messages are not compared.
  public static func == (lhs: PostgresURLError, rhs: PostgresURLError) -> Bool {
    lhs.code == rhs.code
  }

  /// Hashes the code only, consistent with `==`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
  }

  /// The message, for logs.
  public var description: String { "invalid PostgreSQL URL: \(message)" }
}

/// A libpq-style URL, read: where the server is, who connects, and how.
struct PostgresURL {
  enum Endpoint {
    case unixSocket(path: String)
    case tcp(host: String, port: Int)
  }

  var endpoint: Endpoint
  var username: String
  var password: String?
  var database: String?
  /// `nil`: not encrypted.
  var tls: TLSConfiguration?

  /// Reads `string` (see `PostgresClient.Configuration.init(url:)`).
  init(_ string: String) throws {
    guard let components = URLComponents(string: string) else {
      throw PostgresURLError(.notAURL, message: "not a URL (expected postgres://user:password@host:port/database)")
    }
    guard components.scheme == "postgres" || components.scheme == "postgresql" else {
      throw PostgresURLError(.unsupportedScheme, message: "the scheme must be postgres:// or postgresql://")
    }
    var items: [String: String] = [:]
    for item in components.queryItems ?? [] {
      items[item.name] = item.value ?? ""
    }
    let known: Set<String> = ["sslmode", "sslrootcert", "host", "port", "user", "password", "dbname"]
    if let unknown = items.keys.sorted().first(where: { !known.contains($0) }) {
      throw PostgresURLError(.unsupportedParameter, message: "unsupported parameter '\(unknown)'")
    }
    let username = items["user"] ?? components.user?.removingPercentEncoding ?? ""
    guard !username.isEmpty else {
      throw PostgresURLError(.missingUser, message: "no user name (postgres://USER@host/database)")
    }
    self.username = username
    password = items["password"] ?? components.password?.removingPercentEncoding
    database = String(components.path.drop(while: { $0 == "/" })).removingPercentEncoding
    if let name = items["dbname"] { database = name }
    if database?.isEmpty == true { database = nil }
    let port: Int
    if let text = items["port"] {
      guard let value = Int(text), (1...65535).contains(value) else {
        throw PostgresURLError(.invalidPort, message: "port '\(text)' is not a number from 1 to 65535")
      }
      port = value
    } else {
      port = components.port ?? 5432
    }
    let sslmode = items["sslmode"] ?? "disable"

    if let socketDirectory = items["host"], socketDirectory.hasPrefix("/") {
      guard sslmode == "disable" else {
        throw PostgresURLError(
          .unsupportedSSLMode, message: "sslmode=\(sslmode) with a unix socket (host=\(socketDirectory))")
      }
      endpoint = .unixSocket(path: socketDirectory + "/.s.PGSQL.\(port)")
      tls = nil
      return
    }
    let host = items["host"] ?? components.host ?? ""
    guard !host.isEmpty else {
      throw PostgresURLError(
        .missingHost, message: "no host (postgres://user@HOST/database or ?host=/socket/directory)")
    }
    endpoint = .tcp(host: host, port: port)
    switch sslmode {
    case "disable":
      tls = nil
    case "require":
      var configuration = TLSConfiguration.makeClientConfiguration()
      configuration.certificateVerification = .none
      tls = configuration
    case "verify-ca", "verify-full":
      var configuration = TLSConfiguration.makeClientConfiguration()
      configuration.certificateVerification = sslmode == "verify-ca" ? .noHostnameVerification : .fullVerification
      if let file = items["sslrootcert"] {
        guard FileManager.default.isReadableFile(atPath: file) else {
          throw PostgresURLError(.unreadableRootCertificate, message: "sslrootcert '\(file)' is not a readable file")
        }
        configuration.trustRoots = .file(file)
      }
      tls = configuration
    default:
      throw PostgresURLError(
        .unsupportedSSLMode,
        message: "sslmode '\(sslmode)' is not supported (disable, require, verify-ca or verify-full)")
    }
  }

  /// Where the URL points, for messages: host and port, or the socket (never the password).
  var place: String {
    switch endpoint {
    case .unixSocket(let path): "the unix socket \(path)"
    case .tcp(let host, let port): "\(host):\(port)"
    }
  }
}

extension PostgresClient.Configuration {
  /// Reads a libpq-style URL:
  /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE&sslrootcert=FILE&host=/socket/dir]`
  /// (`postgresql://` too; user, password and database are percent-decoded).
  ///
  /// - A `host` query item that is a directory path (as libpq's) connects to the server's unix
  ///   socket in that directory (`.s.PGSQL.PORT`), unencrypted.
  /// - `sslmode`: without it, or with `disable`, the TCP connection is **not encrypted**.
  ///   `require` encrypts but does not check the server's certificate (as libpq);
  ///   `verify-ca` checks the chain against `sslrootcert` (or the system's roots);
  ///   `verify-full` checks the chain and the host name. `prefer` and `allow` are refused: say
  ///   what you mean.
  ///
  /// Errors never repeat the password.
  public init(url string: String) throws {
    let url = try PostgresURL(string)
    switch url.endpoint {
    case .unixSocket(let path):
      self.init(unixSocketPath: path, username: url.username, password: url.password, database: url.database)
    case .tcp(let host, let port):
      self.init(
        host: host, port: port, username: url.username, password: url.password, database: url.database,
        tls: url.tls.map { .require($0) } ?? .disable)
    }
  }
}
