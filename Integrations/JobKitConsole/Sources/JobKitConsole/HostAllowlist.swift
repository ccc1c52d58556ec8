import Foundation
import HTTPTypes
import Hummingbird

/// The host names the console answers to, against DNS rebinding: a page of another site whose
/// name was made to point at the console's address sends that site's name as `Host`, and gets
/// a 421 (Misdirected Request) instead of a page or an action.
///
/// Names are compared without the port and case; IPv6 addresses without brackets (`::1`). A
/// request without a `Host` names nothing to check and passes (HTTP/1.1 browsers always send
/// one). `nil` in ``RemoteConsole/Configuration/allowedHosts`` turns the check off (a reverse
/// proxy in front checks names).
public struct HostAllowlist: Sendable, Equatable {
  /// The loopback names: `localhost`, `127.0.0.1`, `::1`.
  public static let loopback = ["localhost", "127.0.0.1", "::1"]

  /// The names allowed, lowercased.
  public let names: Set<String>

  /// An allowlist of `names` (host names or addresses, without port).
  public init(_ names: [String]) {
    self.names = Set(names.map { Self.bare($0) })
  }

  /// Whether a request whose `Host` header (or HTTP/2 authority) is `host` may be answered.
  public func allows(host: String?) -> Bool {
    guard let host, !host.isEmpty else { return true }
    return names.contains(Self.name(ofAuthority: host))
  }

  /// The host name of an authority (`host[:port]`, `[v6]:port`), lowercased, without brackets.
  static func name(ofAuthority authority: String) -> String {
    let lowered = authority.lowercased()
    if lowered.hasPrefix("["), let close = lowered.firstIndex(of: "]") {
      return String(lowered[lowered.index(after: lowered.startIndex)..<close])
    }
    if let colon = lowered.lastIndex(of: ":"), !lowered[..<colon].contains(":") {
      return String(lowered[..<colon])
    }
    return lowered
  }

  /// A configured name as compared: lowercased, brackets of an IPv6 address dropped.
  static func bare(_ name: String) -> String {
    let lowered = name.lowercased()
    if lowered.hasPrefix("["), lowered.hasSuffix("]") { return String(lowered.dropFirst().dropLast()) }
    return lowered
  }
}

/// Answers 421 to a request whose host the ``HostAllowlist`` does not allow; passes the others on.
struct HostAllowlistMiddleware<Context: RequestContext>: RouterMiddleware {
  let allowlist: HostAllowlist
  let console: RemoteConsole
  let paths: ConsolePaths

  func handle(
    _ request: Request, context: Context, next: (Request, Context) async throws -> Response
  ) async throws -> Response {
    guard allowlist.allows(host: request.head.authority) else {
      console.logger.info(
        "a request for another host was refused",
        metadata: ["host": "\(request.head.authority ?? "")"])
      return console.message(
        status: .misdirectedRequest, "This console does not answer to that host name.", paths: paths)
    }
    return try await next(request, context)
  }
}
