/// The command line of `jobkit-console`:
/// `jobkit-console --database URL [--listen HOST:PORT] [--token TOKEN] [--allow-host NAME]...`.
///
/// `--listen` defaults to `127.0.0.1:8080` (loopback); the token may come from the environment
/// variable `JOBKIT_CONSOLE_TOKEN` instead (which keeps it out of `ps`). Without a token the
/// console is read-only. The console answers to the loopback names and to each `--allow-host`
/// (``HostAllowlist``, against DNS rebinding): name the host it is reached by when it listens
/// on another address.
public struct ConsoleOptions: Sendable, Equatable {
  /// The database's URL, as ``PostgresClient/Configuration/init(url:)`` reads it.
  public var database: String
  /// The address to listen on.
  public var host: String
  /// The port to listen on.
  public var port: Int
  /// The token actions need, `nil` for a read-only console.
  public var token: String?
  /// Host names the console answers to besides the loopback ones (`--allow-host`, repeatable).
  public var allowedHosts: [String] = []

  /// The environment variable that may hold the token.
  public static let tokenVariable = "JOBKIT_CONSOLE_TOKEN"

  /// The usage line.
  public static let usage =
    "usage: jobkit-console --database URL [--listen HOST:PORT] [--token TOKEN] [--allow-host NAME]...   "
    + "(token also from \(tokenVariable))"

  /// Options with every field given.
  public init(database: String, host: String = "127.0.0.1", port: Int = 8080, token: String? = nil) {
    self.database = database
    self.host = host
    self.port = port
    self.token = token
  }

  /// Reads `arguments` (without the program's name); `--token` wins over the environment's.
  /// Errors never repeat the database URL (it may hold a password).
  public static func parse(_ arguments: [String], environment: [String: String]) throws -> ConsoleOptions {
    var database: String?
    var listen: (host: String, port: Int)?
    var token: String?
    var hosts: [String] = []
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
      let name: String
      var value: String?
      if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
        name = String(argument[..<equals])
        value = String(argument[argument.index(after: equals)...])
      } else {
        name = argument
      }
      guard ["--database", "--listen", "--token", "--allow-host"].contains(name) else {
        throw ConsoleOptionsError(message: "unknown argument '\(name)'")
      }
      if value == nil { value = remaining.popFirst() }
      guard let value, !value.isEmpty else { throw ConsoleOptionsError(message: "\(name) needs a value") }
      switch name {
      case "--database": database = value
      case "--listen": listen = try parseListen(value)
      case "--allow-host": hosts.append(value)
      default: token = value
      }
    }
    guard let database else { throw ConsoleOptionsError(message: "--database URL is required") }
    let address = listen ?? (host: "127.0.0.1", port: 8080)
    var options = ConsoleOptions(
      database: database, host: address.host, port: address.port, token: token ?? environment[tokenVariable])
    options.allowedHosts = hosts
    return options
  }

  /// Reads `HOST:PORT` (`[::1]:8080` for an IPv6 address).
  public static func parseListen(_ text: String) throws -> (host: String, port: Int) {
    let host: Substring
    let port: Substring
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
        throw ConsoleOptionsError(message: "--listen '\(text)' is not [IPV6]:PORT")
      }
      host = text[text.index(after: text.startIndex)..<close]
      port = text[text.index(close, offsetBy: 2)...]
    } else {
      guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
        throw ConsoleOptionsError(message: "--listen '\(text)' is not HOST:PORT")
      }
      host = text[..<colon]
      port = text[text.index(after: colon)...]
    }
    guard !host.isEmpty else { throw ConsoleOptionsError(message: "--listen '\(text)' has no host") }
    guard let number = Int(port), (0...65535).contains(number) else {
      throw ConsoleOptionsError(message: "--listen '\(text)': the port must be a number from 0 to 65535")
    }
    return (String(host), number)
  }
}

/// A command line `jobkit-console` cannot use. The message never holds the database URL.
public struct ConsoleOptionsError: Error, Sendable, Equatable, CustomStringConvertible {
  /// What is wrong.
  public let message: String

  /// The message and the usage line.
  public var description: String { "jobkit-console: \(message)\n\(ConsoleOptions.usage)" }
}
