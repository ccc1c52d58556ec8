import Foundation
import JobKitPostgres

/// The console's pages as ``HTML``: every value is interpolated, so escaped.
enum ConsolePages {
  static let states = ["available", "running", "completed", "failed", "cancelled"]

  /// A whole page: `before` and `after` stay, `live` is the part the script refreshes.
  static func layout(
    title: String, before: HTML = "", live: HTML, after: HTML = "", refresh: Duration?, paths: ConsolePaths
  ) -> HTML {
    let refreshMilliseconds = refresh.map { Int($0.seconds * 1000) } ?? 0
    return """
      <!doctype html>
      <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
      <title>\(title) · JobKit console</title>
      <link rel="stylesheet" href="\(paths.styleSheet)"><script src="\(paths.script)" defer></script></head>
      <body data-refresh-ms="\(refreshMilliseconds)">
      <header><a class="home" href="\(paths.dashboard)">JobKit console</a> <a href="\(paths.tasks())">Tasks</a></header>
      <main><h1>\(title)</h1>
      \(before)<div id="live">\(live)</div>\(after)
      </main></body></html>
      """
  }

  /// The line that says when the live part was rendered.
  static func refreshed(at date: Date = Date()) -> HTML {
    let time = date.formatted(.iso8601.time(includingFractionalSeconds: false))
    return "<p class=\"refreshed\">Refreshed at <time>\(time) UTC</time></p>"
  }

  // MARK: Dashboard

  static func dashboard(
    _ summaries: [RemoteQueue.KindSummary], paused: [String: Date] = [:], paths: ConsolePaths
  ) -> HTML {
    guard !summaries.isEmpty else {
      return "<p class=\"empty\">No tasks: the table is empty.</p>"
    }
    let headers = HTML(joining: states.map { state -> HTML in "<th>\(state)</th>" })
    let rows = summaries.map { summary -> HTML in
      let filter = RemoteQueue.TaskFilter(queue: summary.queue, kind: summary.kind)
      let counts = HTML(
        joining: states.map { state -> HTML in
          var byState = filter
          byState.state = state
          return """
            <td class="count" data-state="\(state)"><a href="\(paths.tasks(byState))">\(summary.count(state))</a></td>
            """
        })
      let perMinute = String(format: "%.1f", Double(summary.completedLastFiveMinutes) / 5)
      let expired: HTML =
        summary.expiredLeases > 0 ? "<td class=\"warn\">\(summary.expiredLeases)</td>" : "<td>0</td>"
      let isPaused = paused[summary.queue] != nil
      let pausedMark: HTML = isPaused ? " <span class=\"paused\">paused</span>" : ""
      return """
        <tr data-queue="\(summary.queue)" data-kind="\(summary.kind)" data-paused="\(isPaused)">\
        <td><a href="\(paths.tasks(.init(queue: summary.queue)))">\(summary.queue)</a>\(pausedMark)</td>\
        <td><a href="\(paths.tasks(filter))">\(summary.kind)</a></td>\(counts)\
        <td class="age">\(summary.oldestAvailableAge.map(age) ?? "–")</td>\(expired)\
        <td class="throughput">\(summary.completedLastMinute)</td><td class="throughput">\(perMinute)</td></tr>
        """
    }
    return """
      <table class="queues"><thead><tr><th>Queue</th><th>Kind</th>\(headers)\
      <th>Oldest ready</th><th>Expired leases</th><th>Done, last min</th><th>Done per min, last 5</th></tr></thead>
      <tbody>\(rows)</tbody></table>
      """
  }

  // MARK: Task list

  static func filterForm(_ filter: RemoteQueue.TaskFilter, paths: ConsolePaths) -> HTML {
    let options = HTML(
      joining: ([""] + states).map { state -> HTML in
        let selected: HTML = filter.state == state || (state.isEmpty && filter.state == nil) ? " selected" : ""
        return "<option value=\"\(state)\"\(selected)>\(state.isEmpty ? "any state" : state)</option>"
      })
    return """
      <form class="filter" method="get" action="\(paths.tasks())">
      <label>Queue <input name="queue" value="\(filter.queue ?? "")"></label>
      <label>Kind <input name="kind" value="\(filter.kind ?? "")"></label>
      <label>State <select name="state">\(options)</select></label>
      <label>Key starts with <input name="key" value="\(filter.keyPrefix ?? "")"></label>
      <label>Input field <input name="field" placeholder="customer.id" value="\(filter.inputField ?? "")"></label>
      <label>= <input name="value" value="\(filter.inputValue ?? "")"></label>
      <button type="submit">Filter</button></form>
      """
  }

  static func taskList(
    _ tasks: [RemoteQueue.TaskSnapshot], filter: RemoteQueue.TaskFilter, hasMore: Bool, isFirstPage: Bool,
    paths: ConsolePaths
  ) -> HTML {
    let rows = tasks.map { task -> HTML in
      """
      <tr data-id="\(task.id)"><td><a href="\(paths.task(task.id))">\(task.id)</a></td><td>\(task.queue)</td>\
      <td>\(task.kind)</td><td class="key">\(task.idempotencyKey)</td>\
      <td class="state" data-state="\(task.state)">\(task.state)</td><td>\(task.attempt)/\(task.maxAttempts)</td>\
      <td>\(age(task.age)) ago</td><td class="error">\(preview(task.errorMessage ?? "", limit: 120))</td></tr>
      """
    }
    var pager: [HTML] = []
    if !isFirstPage { pager.append("<a href=\"\(paths.tasks(filter))\">Newest</a>") }
    if hasMore, let last = tasks.last {
      pager.append("<a class=\"older\" href=\"\(paths.tasks(filter, after: last.cursor))\">Older →</a>")
    }
    let table: HTML =
      tasks.isEmpty
      ? "<p class=\"empty\">No task matches.</p>"
      : """
      <table class="tasks"><thead><tr><th>Id</th><th>Queue</th><th>Kind</th><th>Key</th><th>State</th>\
      <th>Attempts</th><th>Created</th><th>Error</th></tr></thead><tbody>\(rows)</tbody></table>
      """
    return "\(table)<nav class=\"pager\">\(pager)</nav>"
  }

  // MARK: Task page

  static func taskDetail(
    _ task: RemoteQueue.TaskSnapshot, leaseDuration: Double, parent: RemoteQueue.TaskTree.Parent? = nil,
    paths: ConsolePaths
  ) -> HTML {
    var lease: HTML = "–"
    if task.state == "running", let expiresIn = task.leaseExpiresIn {
      let heartbeat = max(0, leaseDuration - expiresIn)
      lease =
        expiresIn >= 0
        ? "expires in \(age(expiresIn)); last heartbeat about \(age(heartbeat)) ago"
        : "<span class=\"warn\">expired \(age(-expiresIn)) ago: no heartbeat (a worker takes it back)</span>"
    }
    let runAfter: HTML =
      task.runAfterIn > 0 ? "in \(age(task.runAfterIn))" : "due since \(age(-task.runAfterIn))"
    let cancel: HTML = task.cancelRequested ? " <span class=\"warn\">(cancel requested)</span>" : ""
    let finished: HTML = task.finishedAgo.map { "\(age($0)) ago" } ?? "–"
    let error: HTML = task.errorMessage.map { "<pre class=\"error\">\(preview($0, limit: 4000))</pre>" } ?? "–"
    let output: HTML =
      task.outputPreview.map { data in bytes(data, total: task.outputLength, className: "output") } ?? "–"
    let parentLink: HTML =
      parent.map { parent in
        """

        <dt>Parent</dt><dd><a class="parent" href="\(paths.task(parent.id))">\(parent.kind) \(parent.id)</a> \
        <span class="key">\(parent.idempotencyKey)</span></dd>
        """
      } ?? ""
    return """
      <dl class="task">
      <dt>Queue</dt><dd>\(task.queue)</dd>
      <dt>Kind</dt><dd>\(task.kind)</dd>
      <dt>Key</dt><dd class="key">\(task.idempotencyKey)</dd>\(parentLink)
      <dt>State</dt><dd class="state" data-state="\(task.state)">\(task.state)\(cancel)</dd>
      <dt>Attempts</dt><dd>\(task.attempt) of \(task.maxAttempts)</dd>
      <dt>Owner</dt><dd>\(task.owner ?? "–")</dd>
      <dt>Lease</dt><dd>\(lease)</dd>
      <dt>Run after</dt><dd>\(runAfter)</dd>
      <dt>Created</dt><dd>\(age(task.age)) ago</dd>
      <dt>Finished</dt><dd>\(finished)</dd>
      <dt>Error</dt><dd>\(error)</dd>
      <dt>Input</dt><dd>\(bytes(task.inputPreview, total: task.inputLength, className: "input"))</dd>
      <dt>Output</dt><dd>\(output)</dd>
      </dl>
      """
  }

  static func actions(_ task: RemoteQueue.TaskSnapshot, readOnly: Bool, notice: String?, paths: ConsolePaths)
    -> HTML
  {
    let noticeText: String? =
      switch notice {
      case "retried": "Retried: the task is available again."
      case "cancel-requested": "Cancel requested."
      default: nil
      }
    let shown: HTML = noticeText.map { "<p class=\"notice\">\($0)</p>" } ?? ""
    let canRetry = !readOnly && (task.state == "failed" || task.state == "cancelled")
    let canCancel = !readOnly && (task.state == "available" || task.state == "running")
    func form(_ action: String, _ label: String, enabled: Bool) -> HTML {
      let disabled: HTML = enabled ? "" : " disabled"
      return """
        <form class="action" method="post" action="\(paths.action(action, task: task.id))">\
        <input type="password" name="token" placeholder="token" autocomplete="off"\(disabled)>\
        <button type="submit" name="action" value="\(action)"\(disabled)>\(label)</button></form>
        """
    }
    let readOnlyNote: HTML =
      readOnly ? "<p class=\"readonly\">Read-only: the console was started without a token.</p>" : ""
    return """
      <section class="actions"><h2>Actions</h2>\(shown)\(readOnlyNote)\
      \(form("retry", "Retry", enabled: canRetry))\(form("cancel", "Cancel", enabled: canCancel))</section>
      """
  }

  // MARK: Children and timeline

  /// The task's descendants as nested lists and their timeline as an SVG; nothing when the
  /// task has no children.
  static func taskTree(_ tree: RemoteQueue.TaskTree, paths: ConsolePaths) -> HTML {
    guard tree.nodes.count > 1 else { return "" }
    func list(_ parent: Int64) -> HTML {
      let items = tree.children(of: parent).map { node -> HTML in
        let nested = list(node.id)
        return """
          <li data-id="\(node.id)"><a href="\(paths.task(node.id))">\(node.kind)</a> \
          <span class="key">\(node.localKey)</span> \
          <span class="state" data-state="\(node.state)">\(node.state)</span> \
          <span class="attempts">\(node.attempt)/\(node.maxAttempts)</span>\(nested)</li>
          """
      }
      return items.isEmpty ? "" : "<ul>\(items)</ul>"
    }
    let cut: HTML =
      tree.isCut
      ? "<p class=\"cut\">Cut: only the first \(tree.nodes.count) rows are shown.</p>"
      : ""
    return """
      <section class="tree"><h2>Children</h2>\(cut)<div class="tree">\(list(tree.root.id))</div>
      <h2>Timeline</h2>\(timeline(tree, paths: paths))</section>
      """
  }

  /// One bar per row of `tree` (the task first): a thin part from its creation to its first
  /// start (waiting), a thick part from there to its end (or now), colored by state; scaled
  /// from the first creation to the last end.
  static func timeline(_ tree: RemoteQueue.TaskTree, paths: ConsolePaths) -> HTML {
    // From the first creation to the last end (now while a row is unfinished).
    let origin = tree.nodes.map(\.createdAgo).max() ?? 0
    let last = tree.nodes.map { $0.finishedAgo ?? 0 }.min() ?? 0
    let span = max(origin - last, 0.001)
    let width = 1000.0
    let label = 260.0
    let rowHeight = 18
    func x(_ ago: Double) -> String { String(format: "%.1f", label + (origin - ago) / span * (width - label)) }
    let bars = tree.nodes.enumerated().map { index, node -> HTML in
      let y = index * rowHeight
      let end = node.finishedAgo ?? 0
      let start = node.firstStartedAgo ?? end
      let indent = String(repeating: "  ", count: node.depth)
      let ran = node.firstStartedAgo == nil ? "never started" : "\(age(start - end)) from first start to end"
      let title = "\(node.kind) \(node.localKey): \(node.state), \(ran)"
      return """
        <g class="bar" data-id="\(node.id)" data-state="\(node.state)"><title>\(title)</title>\
        <a href="\(paths.task(node.id))"><text x="0" y="\(y + 13)" xml:space="preserve">\
        \(indent)\(preview(node.kind + " " + node.localKey, limit: 40))</text></a>\
        <line class="wait" x1="\(x(node.createdAgo))" x2="\(x(start))" y1="\(y + 9)" y2="\(y + 9)"/>\
        <rect class="run" x="\(x(start))" y="\(y + 3)" height="12" \
        width="\(String(format: "%.1f", max(1, (start - end) / span * (width - label))))"/></g>
        """
    }
    let height = tree.nodes.count * rowHeight + 4
    return """
      <svg class="timeline" role="img" aria-label="Timeline of the task and its children" \
      viewBox="0 0 \(Int(width)) \(height)" width="100%" preserveAspectRatio="xMinYMin meet">\
      \(bars)</svg><p class="timeline-span">\(age(span)) from the first creation to the last end\
      \(last > 0 ? "" : " (now)").</p>
      """
  }

  // MARK: Values

  /// `seconds` in words: `<1 s`, `42 s`, `3 min 4 s`, `2 h 5 min`, `3 d 4 h`.
  static func age(_ seconds: Double) -> String {
    let total = Int(seconds.rounded(.down))
    if total < 1 { return "<1 s" }
    if total < 60 { return "\(total) s" }
    if total < 3600 { return "\(total / 60) min \(total % 60) s" }
    if total < 86400 { return "\(total / 3600) h \(total % 3600 / 60) min" }
    return "\(total / 86400) d \(total % 86400 / 3600) h"
  }

  /// `text` cut to `limit` characters, with an ellipsis when cut.
  static func preview(_ text: String, limit: Int) -> String {
    text.count > limit ? String(text.prefix(limit)) + "…" : text
  }

  /// Bytes as text (UTF-8, invalid sequences replaced), saying when only the first were read.
  static func bytes(_ data: Data, total: Int, className: String) -> HTML {
    let text = String(decoding: data, as: UTF8.self)
    let cut: HTML = data.count < total ? "<p class=\"cut\">The first \(data.count) of \(total) bytes.</p>" : ""
    return "<pre class=\"\(className)\">\(text)</pre>\(cut)"
  }
}
