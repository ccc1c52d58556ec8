import Foundation
import PostgresNIO

/// A connection URL that could not be used. Its message never contains the URL's password.
public struct PostgresURLError: Error, Sendable, CustomStringConvertible {
  /// What is wrong, with the password (if any) left out.
  public let message: String

  /// The message, for logs.
  public var description: String { "invalid PostgreSQL URL: \(message)" }
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
    guard let components = URLComponents(string: string) else {
      throw PostgresURLError(message: "not a URL (expected postgres://user:password@host:port/database)")
    }
    guard components.scheme == "postgres" || components.scheme == "postgresql" else {
      throw PostgresURLError(message: "the scheme must be postgres:// or postgresql://")
    }
    var items: [String: String] = [:]
    for item in components.queryItems ?? [] {
      items[item.name] = item.value ?? ""
    }
    let known: Set<String> = ["sslmode", "sslrootcert", "host", "port", "user", "password", "dbname"]
    if let unknown = items.keys.sorted().first(where: { !known.contains($0) }) {
      throw PostgresURLError(message: "unsupported parameter '\(unknown)'")
    }
    let username = items["user"] ?? components.user?.removingPercentEncoding ?? ""
    guard !username.isEmpty else {
      throw PostgresURLError(message: "no user name (postgres://USER@host/database)")
    }
    let password = items["password"] ?? components.password?.removingPercentEncoding
    var database = String(components.path.drop(while: { $0 == "/" })).removingPercentEncoding
    if let name = items["dbname"] { database = name }
    if database?.isEmpty == true { database = nil }
    let port: Int
    if let text = items["port"] {
      guard let value = Int(text), (1...65535).contains(value) else {
        throw PostgresURLError(message: "port '\(text)' is not a number from 1 to 65535")
      }
      port = value
    } else {
      port = components.port ?? 5432
    }
    let sslmode = items["sslmode"] ?? "disable"

    if let socketDirectory = items["host"], socketDirectory.hasPrefix("/") {
      guard sslmode == "disable" else {
        throw PostgresURLError(message: "sslmode=\(sslmode) with a unix socket (host=\(socketDirectory))")
      }
      self.init(
        unixSocketPath: socketDirectory + "/.s.PGSQL.\(port)", username: username, password: password,
        database: database)
      return
    }
    let host = items["host"] ?? components.host ?? ""
    guard !host.isEmpty else {
      throw PostgresURLError(message: "no host (postgres://user@HOST/database or ?host=/socket/directory)")
    }
    let tls: TLS
    switch sslmode {
    case "disable":
      tls = .disable
    case "require":
      var configuration = TLSConfiguration.makeClientConfiguration()
      configuration.certificateVerification = .none
      tls = .require(configuration)
    case "verify-ca", "verify-full":
      var configuration = TLSConfiguration.makeClientConfiguration()
      configuration.certificateVerification = sslmode == "verify-ca" ? .noHostnameVerification : .fullVerification
      if let file = items["sslrootcert"] {
        guard FileManager.default.isReadableFile(atPath: file) else {
          throw PostgresURLError(message: "sslrootcert '\(file)' is not a readable file")
        }
        configuration.trustRoots = .file(file)
      }
      tls = .require(configuration)
    default:
      throw PostgresURLError(
        message: "sslmode '\(sslmode)' is not supported (disable, require, verify-ca or verify-full)")
    }
    self.init(host: host, port: port, username: username, password: password, database: database, tls: tls)
  }
}
