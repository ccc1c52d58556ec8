import Foundation
import JobKit

/// Asks the server again after a 5xx answer, and waits for that answer's own dispatch, so its
/// commands finish before this command (and so before the commands after it) does.
///
/// A command that dispatches on its own map: ``CommandMap/dispatch(_:)`` never blocks, and the
/// command waits for the returned job without holding a thread.
final class Retry: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  private let response: ServerResponse
  private let map: CommandMap
  private let server: SimulatedServer
  private let reporter: Reporter
  private let maxAttempts = 3

  init(_ response: ServerResponse, map: CommandMap, server: SimulatedServer, reporter: Reporter) {
    self.response = response
    self.map = map
    self.server = server
    self.reporter = reporter
    super.init()
  }

  override func operationStart() {
    guard response.attempt < maxAttempts else {
      reporter.line(
        "Retry: \(response.request) still failing after \(response.attempt) attempts, giving up", for: response)
      operationDone()
      return
    }
    reporter.line("Retry: \(response.request) answered \(response.status), asking again", for: response)
    let answer = server.respond(to: response.request)
    reporter.header(answer)
    let job = map.dispatch(answer)
    Task {
      try? await job.waitForFinish()
      reporter.report(job, for: answer)
      operationDone()
    }
  }
}

/// Adds the points of a `score` answer to the model.
final class AddScore: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  private let response: ServerResponse
  private let model: Model
  private let reporter: Reporter

  init(_ response: ServerResponse, model: Model, reporter: Reporter) {
    self.response = response
    self.model = model
    self.reporter = reporter
    super.init()
  }

  override func operationStart() {
    let points = Int(response.value("points") ?? "") ?? 0
    let total = model.add(points: points)
    reporter.line("AddScore: +\(points), score \(total)", for: response)
    operationDone()
  }
}
