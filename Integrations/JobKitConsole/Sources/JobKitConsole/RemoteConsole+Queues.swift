import Foundation
import HTTPTypes
import Hummingbird
import JobKitPostgres

/// The console's actions on a whole queue: pause and resume, through the queue's own
/// statements (``JobKitPostgres/RemoteQueue/pause()``, ``JobKitPostgres/RemoteQueue/resume()``).
extension RemoteConsole {
  /// Pauses (`pause`) or resumes the queue named by the form field `queue`, after the same
  /// checks as a task's actions; back to the dashboard with a notice.
  func actOnQueue(pause: Bool, _ request: Request, _ paths: ConsolePaths) async throws -> Response {
    let (form, verdict) = try await guardedForm(request)
    let action = pause ? "pause" : "resume"
    guard verdict == .allowed else {
      logger.info(
        "an action was refused",
        metadata: ["action": "\(action)", "queue": "\(form["queue"] ?? "?")", "verdict": "\(verdict)"])
      return message(status: .forbidden, Self.refusal(verdict), paths: paths)
    }
    guard let name = form["queue"], !name.isEmpty else {
      return message(status: .badRequest, "No queue named: the form field queue is missing.", paths: paths)
    }
    do {
      let queue = RemoteQueue(client: client, name: name, configuration: .init(), logger: logger)
      if pause {
        try await queue.pause()
      } else {
        try await queue.resume()
      }
      logger.info("queue \(action)d", metadata: ["queue": "\(name)"])
      var headers = HTTPFields()
      headers[.location] = paths.dashboard + "?done=" + action + "d"
      return Response(status: .seeOther, headers: headers)
    } catch {
      return failure(error, fragment: false, paths: paths)
    }
  }
}
