import Foundation
import JobKit

/// Asks the server again after a 5xx answer, and waits for that answer's own dispatch, so its
/// commands finish before this command (and so before the commands after it) does.
///
/// A command that dispatches on its own map: ``CommandMap/dispatch(_:)`` never blocks, and the
/// `async` body awaits the returned job without holding a thread.
func retry(_ response: ServerResponse, map: CommandMap, server: SimulatedServer, reporter: Reporter) -> Work<Void> {
  Work(async: {
    let maxAttempts = 3
    guard response.attempt < maxAttempts else {
      reporter.line(
        "Retry: \(response.request) still failing after \(response.attempt) attempts, giving up", for: response)
      return
    }
    reporter.line("Retry: \(response.request) answered \(response.status), asking again", for: response)
    let answer = server.respond(to: response.request)
    reporter.header(answer)
    let job = map.dispatch(answer)
    try? await job.waitForFinish()
    reporter.report(job, for: answer)
  })
}

/// Adds the points of a `score` answer to the model.
func addScore(_ response: ServerResponse, model: Model, reporter: Reporter) -> Work<Void> {
  Work {
    let points = Int(response.value("points") ?? "") ?? 0
    let total = model.add(points: points)
    reporter.line("AddScore: +\(points), score \(total)", for: response)
  }
}
