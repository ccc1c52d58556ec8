import Foundation
import JobKit

// Gummi Commander's server-response example, made real: a scripted server answers requests, each
// answer is dispatched as a `ServerResponse` event, and the mapped commands update a model. The
// map runs a dispatch's commands one after another, highest priority first.
//
//   priority 10  StoreResponse  every answer                         (block)
//   priority  8  AddScore       score answers with 200               (game extension)
//   priority  7  Combo          score answers worth 25 points        (game extension, block)
//   priority  5  Retry          status > 500: ask the server again   (command, dispatches again)
//   priority  0  FirstLogin     the first successful login only      (block, once)

func runSample() async {
  let model = Model()
  let reporter = Reporter()
  let server = SimulatedServer(script: [
    "config": [(200, "theme=dark")],
    "login": [(503, ""), (200, "user=ada"), (200, "user=ada")],
    "score": [(200, "points=10"), (502, ""), (200, "points=25"), (200, "points=40"), (200, "points=5")],
  ])
  let map = CommandMap()

  reporter.name(
    map.map(
      ServerResponse.self, priority: 10,
      block: { response in
        model.record(response)
        reporter.line("StoreResponse: last response is \(response.request) \(response.status)", for: response)
      }),
    "StoreResponse")
  reporter.name(
    map.map(ServerResponse.self, priority: 5, guards: [{ $0.status > 500 }]) { [unowned map] response in
      retry(response, map: map, server: server, reporter: reporter)
    },
    "Retry", guards: ["status > 500"])
  reporter.name(
    map.map(
      ServerResponse.self, once: true, guards: [{ $0.request == "login" && $0.status == 200 }],
      block: { response in
        let user = response.value("user") ?? "?"
        model.logIn(user)
        model.showTutorial()
        reporter.line("FirstLogin: welcome, \(user)! showing the tutorial", for: response)
      }),
    "FirstLogin", guards: ["login 200"])

  enum Step {
    case request(String)
    case startGame
    case endGame
  }
  let script: [Step] = [
    .request("config"), .request("login"),
    .startGame, .request("score"), .request("score"), .request("score"), .endGame,
    .request("score"), .request("login"),
  ]
  let game = GameExtension(model: model, reporter: reporter)
  for step in script {
    switch step {
    case .request(let request):
      server.resetAttempts(of: request)
      let response = server.respond(to: request)
      reporter.header(response)
      let job = map.dispatch(response)
      try? await job.run()
      reporter.report(job, for: response)
    case .startGame:
      map.load(game)
      print("game started: game mappings loaded")
    case .endGame:
      map.unload(game)
    }
  }
  print("logged in as \(model.user ?? "nobody")")
}

await runSample()
