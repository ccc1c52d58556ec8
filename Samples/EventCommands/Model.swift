import Foundation

/// The app state the commands update. Thread-safe: commands run on worker threads.
final class Model: Sendable {
  private struct State {
    var lastResponse: ServerResponse?
    var user: String?
    var tutorialShown = false
    var score = 0
  }

  private let state = Locked(State())

  var user: String? { state.withValue { $0.user } }
  var score: Int { state.withValue { $0.score } }

  func record(_ response: ServerResponse) {
    state.withValue { $0.lastResponse = response }
  }

  func logIn(_ user: String) {
    state.withValue { $0.user = user }
  }

  func showTutorial() {
    state.withValue { $0.tutorialShown = true }
  }

  /// Adds `points`; returns the new score.
  func add(points: Int) -> Int {
    state.withValue { state in
      state.score += points
      return state.score
    }
  }

  func resetScore() {
    state.withValue { $0.score = 0 }
  }
}
