import Foundation

/// Decides whether a request may act (retry, cancel): it must come from the console's own pages
/// or from a client that is no browser, and carry the token the console was started with.
///
/// - Same origin: an `Origin` header must name the request's own host (`Host`); without one, a
///   `Sec-Fetch-Site` header must say `same-origin`. A request with neither (curl, a script) is
///   no cross-site request a browser makes, so the token alone decides.
/// - The token: compared in constant time; without a configured token every action is refused
///   (the console is read-only).
public struct ActionGuard: Sendable {
  /// Why a request may or may not act.
  public enum Verdict: Sendable, Equatable {
    /// It may act.
    case allowed
    /// The console has no token: it is read-only.
    case readOnly
    /// The request's token is missing or wrong.
    case badToken
    /// The request comes from another site (its `Origin` or `Sec-Fetch-Site`).
    case crossSite
  }

  /// The token actions need, `nil` for a read-only console.
  public let token: String?

  /// A guard for `token` (`nil` or empty: read-only).
  public init(token: String?) {
    self.token = token?.isEmpty == false ? token : nil
  }

  /// Whether the console accepts actions at all.
  public var isReadOnly: Bool { token == nil }

  /// The verdict on a request to `host` (its `Host` header) with these headers and the token it
  /// gave (header or form field).
  public func check(token given: String?, origin: String?, fetchSite: String?, host: String?) -> Verdict {
    if let origin {
      guard let host, Self.origin(origin, isHost: host) else { return .crossSite }
    } else if let fetchSite, fetchSite.lowercased() != "same-origin" {
      return .crossSite
    }
    guard let token else { return .readOnly }
    guard let given, Self.constantTimeEqual(given, token) else { return .badToken }
    return .allowed
  }

  /// Whether the `Origin` header `origin` (`scheme://host[:port]`) names `host` (`host[:port]`).
  static func origin(_ origin: String, isHost host: String) -> Bool {
    guard let components = URLComponents(string: origin), let scheme = components.scheme?.lowercased(),
      scheme == "http" || scheme == "https", let originHost = components.host, !originHost.isEmpty,
      components.path.isEmpty
    else { return false }
    let defaultPort = scheme == "https" ? 443 : 80
    let originAuthority = "\(originHost.lowercased()):\(components.port ?? defaultPort)"
    guard let hostComponents = URLComponents(string: "\(scheme)://\(host)"), let requestHost = hostComponents.host,
      hostComponents.path.isEmpty
    else { return false }
    return originAuthority == "\(requestHost.lowercased()):\(hostComponents.port ?? defaultPort)"
  }

  /// `a == b`, in a time that does not depend on where they differ.
  static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let left = Array(a.utf8)
    let right = Array(b.utf8)
    guard left.count == right.count else { return false }
    var difference: UInt8 = 0
    for index in left.indices {
      difference |= left[index] ^ right[index]
    }
    return difference == 0
  }
}
