import Foundation

/// A response of the simulated server: the event the sample dispatches.
struct ServerResponse: Sendable, CustomStringConvertible {
  /// Which request this answers, for example `login`.
  let request: String
  /// The HTTP-like status code.
  let status: Int
  /// `key=value` pairs, for example `user=ada`.
  let payload: String
  /// 1 for the first answer to a request, 2 for the first retry, …
  let attempt: Int

  /// The value of `key` in the payload, if any.
  func value(_ key: String) -> String? {
    for pair in payload.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1)
      if parts.count == 2, parts[0] == key { return String(parts[1]) }
    }
    return nil
  }

  var description: String {
    let retry = attempt > 1 ? " (retry \(attempt - 1))" : ""
    return "\(request) → \(status)\(payload.isEmpty ? "" : " \(payload)")\(retry)"
  }
}

/// A server that answers from a fixed script, so every run prints the same thing.
final class SimulatedServer: Sendable {
  private let scripted: Locked<[String: [(status: Int, payload: String)]]>
  private let attempts = Locked<[String: Int]>([:])

  /// `script[request]` lists the answers to successive calls of that request; once they are used
  /// up, the request is answered with 404.
  init(script: [String: [(status: Int, payload: String)]]) {
    scripted = Locked(script)
  }

  /// The next scripted answer to `request`.
  func respond(to request: String) -> ServerResponse {
    let answer = scripted.withValue { script -> (status: Int, payload: String) in
      script[request]?.isEmpty == false ? script[request]!.removeFirst() : (404, "")
    }
    let attempt = attempts.withValue { attempts in
      attempts[request, default: 0] += 1
      return attempts[request]!
    }
    return ServerResponse(request: request, status: answer.status, payload: answer.payload, attempt: attempt)
  }

  /// Starts counting attempts of `request` from 1 again (a new user action, not a retry).
  func resetAttempts(of request: String) {
    attempts.withValue { $0[request] = nil }
  }
}

/// A value behind an `NSLock`, for the sample's shared state.
final class Locked<Value>: @unchecked Sendable {
  // @unchecked Sendable: `value` is only touched inside `withValue`, which holds `lock`.
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) {
    self.value = value
  }

  func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
