import Foundation
import HTTPTypes
import Hummingbird
import JobKitPostgres
import Logging
import PostgresNIO

/// The operators' console of remote tasks: Hummingbird routes that show every queue of the
/// database and let an operator retry or cancel a task.
///
/// ```swift
/// let console = RemoteConsole(client: client, configuration: .init(token: token), logger: logger)
/// console.addRoutes(to: router, atPath: "/jobs")    // a service shows its queue in its own server
/// ```
///
/// - Reads go through ``JobKitPostgres/RemoteQueue``'s console queries (one statement each);
///   actions through the queue's own statements (``JobKitPostgres/RemoteQueue/retryTask(id:)``,
///   ``JobKitPostgres/RemoteQueue/cancelTask(idempotencyKey:)``).
/// - Pages are HTML rendered on the server, every value escaped (``HTML``); a small script
///   refreshes their live part from the same route with `fragment=1`.
/// - Actions are POSTs checked by ``ActionGuard``: same origin and the token (header
///   `X-JobKit-Token` or form field `token`). Without a token the console is read-only.
/// - The `PostgresClient` must be running (in the caller's `ServiceGroup`).
public struct RemoteConsole: Sendable {
  /// What the console shows and who may act.
  public struct Configuration: Sendable {
    /// The token actions need; `nil` or empty: read-only.
    public var token: String?
    /// Rows on one page of a task list.
    public var pageSize: Int = 50
    /// How often pages refresh their live part.
    public var refreshInterval: Duration = .seconds(2)
    /// The workers' lease (``JobKitPostgres/RemoteWorker/Configuration/leaseDuration``), to tell
    /// a running task's last heartbeat from its lease's end.
    public var leaseDuration: Duration = .seconds(30)
    /// The host names the console answers to (``HostAllowlist``, against DNS rebinding): the
    /// loopback names by default; add the names it is reached by, or `nil` to answer any.
    public var allowedHosts: [String]? = HostAllowlist.loopback

    /// A configuration with `token` (default: read-only) and the defaults: 50 rows a page, a
    /// refresh every 2 s, workers' leases of 30 s.
    public init(token: String? = nil) {
      self.token = token
    }
  }

  /// The client the console reads and acts through.
  public let client: PostgresClient
  /// The configuration given at creation.
  public let configuration: Configuration
  let logger: Logger
  let actionGuard: ActionGuard

  /// A console on `client`. `logger` receives refused actions and database errors (never a
  /// password: none is in them).
  public init(
    client: PostgresClient, configuration: Configuration = Configuration(),
    logger: Logger = Logger(label: "JobKitConsole")
  ) {
    self.client = client
    self.configuration = configuration
    self.logger = logger
    self.actionGuard = ActionGuard(token: configuration.token)
  }

  /// Adds the console's routes to `router` under `prefix` (`"/jobs"`, or `""` for the root):
  /// `GET prefix` (the dashboard), `GET prefix/tasks` (a list: `queue`, `kind`, `state`, `key`
  /// (a prefix), `field` and `value` (a field of the JSON input), `after` (a cursor)), `GET prefix/tasks/:id`, `POST prefix/tasks/:id/retry`,
  /// `POST prefix/tasks/:id/cancel`, `POST prefix/queues/pause` and `POST prefix/queues/resume`
  /// (form field `queue`), and the page's script and style sheet. A request for a host name
  /// that ``Configuration/allowedHosts`` does not list gets a 421.
  public func addRoutes<Context: RequestContext>(to router: some RouterMethods<Context>, atPath prefix: String = "") {
    let paths = ConsolePaths(prefix: prefix)
    let group = paths.prefix.isEmpty ? router.group() : router.group(RouterPath(paths.prefix))
    let console = self
    if let names = configuration.allowedHosts {
      group.add(
        middleware: HostAllowlistMiddleware<Context>(allowlist: HostAllowlist(names), console: self, paths: paths))
    }
    group.get { request, _ in try await console.dashboard(request, paths) }
    group.get("tasks") { request, _ in try await console.taskList(request, paths) }
    group.get("tasks/:id") { request, context in
      try await console.taskPage(request, id: context.parameters.get("id", as: Int64.self), paths)
    }
    group.post("tasks/:id/retry") { request, context in
      try await console.act(.retry, request, id: context.parameters.get("id", as: Int64.self), paths)
    }
    group.post("tasks/:id/cancel") { request, context in
      try await console.act(.cancel, request, id: context.parameters.get("id", as: Int64.self), paths)
    }
    group.post("queues/pause") { request, _ in try await console.actOnQueue(pause: true, request, paths) }
    group.post("queues/resume") { request, _ in try await console.actOnQueue(pause: false, request, paths) }
    group.get("console.js") { _, _ in Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8") }
    group.get("console.css") { _, _ in Self.asset(ConsoleAssets.styleSheet, type: "text/css; charset=utf-8") }
  }

  // MARK: Pages

  func dashboard(_ request: Request, _ paths: ConsolePaths) async throws -> Response {
    let fragment = request.uri.queryParameters["fragment"] != nil
    do {
      let summaries = try await RemoteQueue.kindSummaries(client: client, logger: logger)
      let paused = try await RemoteQueue.pausedQueues(client: client, logger: logger)
      let live = ConsolePages.dashboard(summaries, paused: paused, paths: paths)
      let notice = request.uri.queryParameters["done"].map { String($0) }
      let controls = ConsolePages.queueControls(
        queues: Set(summaries.map(\.queue)).union(paused.keys).sorted(), paused: paused,
        readOnly: actionGuard.isReadOnly, notice: notice, paths: paths)
      return page(title: "Queues", live: live, after: controls, fragment: fragment, paths: paths)
    } catch {
      return failure(error, fragment: fragment, paths: paths)
    }
  }

  func taskList(_ request: Request, _ paths: ConsolePaths) async throws -> Response {
    // Read as a form (`+` is a space), as the filter form sends it.
    let query = Self.formFields(request.uri.query ?? "")
    let fragment = query["fragment"] != nil
    func value(_ name: String) -> String? {
      guard let text = query[name], !text.isEmpty else { return nil }
      return text
    }
    let filter = RemoteQueue.TaskFilter(
      queue: value("queue"), kind: value("kind"), state: value("state"), keyPrefix: value("key"),
      inputField: value("field"), inputValue: value("value"))
    let cursor = value("after").flatMap(RemoteQueue.TaskCursor.init(parameter:))
    let pageSize = max(1, configuration.pageSize)
    do {
      let rows = try await RemoteQueue.tasks(
        client: client, filter: filter, after: cursor, limit: pageSize + 1, logger: logger)
      let live = ConsolePages.taskList(
        Array(rows.prefix(pageSize)), filter: filter, hasMore: rows.count > pageSize, isFirstPage: cursor == nil,
        paths: paths)
      return page(
        title: "Tasks", before: ConsolePages.filterForm(filter, paths: paths), live: live, fragment: fragment,
        paths: paths)
    } catch {
      return failure(error, fragment: fragment, paths: paths)
    }
  }

  func taskPage(_ request: Request, id: Int64?, _ paths: ConsolePaths) async throws -> Response {
    let fragment = request.uri.queryParameters["fragment"] != nil
    guard let id else { return notFound(paths) }
    do {
      guard let task = try await RemoteQueue.task(client: client, id: id, logger: logger) else {
        return notFound(paths)
      }
      let tree = try await RemoteQueue.taskTree(client: client, id: id, logger: logger)
      let live: HTML = """
        \(ConsolePages.taskDetail(task, leaseDuration: configuration.leaseDuration.seconds, parent: tree?.parent, paths: paths))\
        \(tree.map { ConsolePages.taskTree($0, paths: paths) } ?? "")
        """
      let notice = request.uri.queryParameters["done"].map { String($0) }
      let actions = ConsolePages.actions(task, readOnly: actionGuard.isReadOnly, notice: notice, paths: paths)
      return page(title: "Task \(id)", live: live, after: actions, fragment: fragment, paths: paths)
    } catch {
      return failure(error, fragment: fragment, paths: paths)
    }
  }

  // MARK: Actions

  enum Action: String {
    case retry
    case cancel
  }

  /// An action's form fields (at most 16 KB) and the guard's verdict on its token, origin,
  /// fetch site and host: every action reads its request through this one door.
  func guardedForm(_ request: Request) async throws -> (form: [String: String], verdict: ActionGuard.Verdict) {
    var request = request
    let body = try await request.collectBody(upTo: 16 * 1024)
    let form = Self.formFields(String(buffer: body))
    let verdict = actionGuard.check(
      token: request.headers[Self.tokenHeader] ?? form["token"], origin: request.headers[.origin],
      fetchSite: request.headers[Self.fetchSiteHeader], host: request.head.authority)
    return (form, verdict)
  }

  func act(_ action: Action, _ request: Request, id: Int64?, _ paths: ConsolePaths) async throws -> Response {
    let (_, verdict) = try await guardedForm(request)
    guard verdict == .allowed else {
      logger.info(
        "an action was refused",
        metadata: ["action": "\(action.rawValue)", "task": "\(id.map(String.init) ?? "?")", "verdict": "\(verdict)"])
      return message(status: .forbidden, Self.refusal(verdict), paths: paths)
    }
    guard let id else { return notFound(paths) }
    do {
      guard let task = try await RemoteQueue.task(client: client, id: id, logger: logger) else {
        return notFound(paths)
      }
      let queue = RemoteQueue(client: client, name: task.queue, configuration: .init(), logger: logger)
      let outcome: String
      switch action {
      case .retry:
        guard try await queue.retryTask(id: id) else {
          return message(
            status: .conflict, "Task \(id) is \(task.state): only a failed or cancelled task is retried.", paths: paths)
        }
        outcome = "retried"
      case .cancel:
        guard task.state == "available" || task.state == "running" else {
          return message(status: .conflict, "Task \(id) is \(task.state): it is already final.", paths: paths)
        }
        try await queue.cancelTask(idempotencyKey: task.idempotencyKey)
        outcome = "cancel-requested"
      }
      logger.info("task \(outcome)", metadata: ["task": "\(id)", "queue": "\(task.queue)"])
      var headers = HTTPFields()
      headers[.location] = paths.task(id) + "?done=" + outcome
      return Response(status: .seeOther, headers: headers)
    } catch {
      return failure(error, fragment: false, paths: paths)
    }
  }

  static let tokenHeader = HTTPField.Name("X-JobKit-Token")!
  static let fetchSiteHeader = HTTPField.Name("Sec-Fetch-Site")!

  static func refusal(_ verdict: ActionGuard.Verdict) -> String {
    switch verdict {
    case .allowed: return ""
    case .readOnly: return "This console is read-only: it was started without a token."
    case .badToken: return "Refused: the token is missing or wrong."
    case .crossSite: return "Refused: the request does not come from this console's own pages."
    }
  }

  /// The fields of a URL-encoded form (`a=1&b=2`); the last of a repeated name wins.
  static func formFields(_ body: String) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in body.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      func decode(_ text: Substring) -> String {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
      }
      fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
    }
    return fields
  }

  // MARK: Responses

  /// A page, or with `fragment` only its live part; the live part says when it was rendered.
  func page(
    title: String, before: HTML = "", live: HTML, after: HTML = "", fragment: Bool, paths: ConsolePaths
  ) -> Response {
    let live: HTML = "\(live)\(ConsolePages.refreshed())"
    let html =
      fragment
      ? live
      : ConsolePages.layout(
        title: title, before: before, live: live, after: after, refresh: configuration.refreshInterval, paths: paths)
    return Self.htmlResponse(html, status: .ok)
  }

  func message(status: HTTPResponse.Status, _ text: String, paths: ConsolePaths) -> Response {
    let body: HTML = "<p class=\"message\">\(text)</p><p><a href=\"\(paths.dashboard)\">Queues</a></p>"
    return Self.htmlResponse(
      ConsolePages.layout(title: "\(status.code)", live: body, refresh: nil, paths: paths), status: status)
  }

  func notFound(_ paths: ConsolePaths) -> Response {
    message(status: .notFound, "No such task.", paths: paths)
  }

  func failure(_ error: any Error, fragment: Bool, paths: ConsolePaths) -> Response {
    let summary = Self.summary(error)
    logger.info("a query failed; the page says so", metadata: ["error": "\(summary)"])
    let body: HTML = "<p class=\"message error\">The database did not answer: \(summary)</p>"
    let html = fragment ? body : ConsolePages.layout(title: "Error", live: body, refresh: nil, paths: paths)
    return Self.htmlResponse(html, status: .serviceUnavailable)
  }

  /// `error` in words: what failed, never the connection's settings.
  static func summary(_ error: any Error) -> String {
    guard let error = error as? PSQLError else { return String(describing: error) }
    if let message = error.serverInfo?[.message] { return "\(error.code): \(message)" }
    return "\(error.code)"
  }

  static let contentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

  static func htmlResponse(_ html: HTML, status: HTTPResponse.Status) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = "text/html; charset=utf-8"
    headers[.contentSecurityPolicy] = contentSecurityPolicy
    headers[.cacheControl] = "no-store"
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: html.rendered)))
  }

  static func asset(_ text: String, type: String) -> Response {
    var headers = HTTPFields()
    headers[.contentType] = type
    headers[.cacheControl] = "max-age=300"
    headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
    return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
  }
}

extension Duration {
  /// The duration in seconds.
  var seconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}
