import JobKit

/// The mappings of the "game" phase: loaded when a game starts, unloaded when it ends, all at
/// once. Its clean-up closes the game.
final class GameExtension: CommandExtension {
  private let model: Model
  private let reporter: Reporter

  init(model: Model, reporter: Reporter) {
    self.model = model
    self.reporter = reporter
  }

  func configure(_ mapper: CommandExtensionMapper) {
    let model = model
    let reporter = reporter
    let scored: @Sendable (ServerResponse) -> Bool = { $0.request == "score" && $0.status == 200 }
    reporter.name(
      mapper.map(ServerResponse.self, priority: 8, guards: [scored]) { response in
        addScore(response, model: model, reporter: reporter)
      },
      "AddScore", guards: ["score 200"], removal: "game extension unloaded")
    reporter.name(
      mapper.map(ServerResponse.self, priority: 7, guards: [scored, { $0.value("points") == "25" }]) { response in
        reporter.line("Combo: 25 points in one go, bonus +5, score \(model.add(points: 5))", for: response)
      },
      "Combo", guards: ["score 200", "points = 25"], removal: "game extension unloaded")
  }

  func didUnload() {
    print("game over: final score \(model.score); game mappings removed")
    model.resetScore()
  }
}
