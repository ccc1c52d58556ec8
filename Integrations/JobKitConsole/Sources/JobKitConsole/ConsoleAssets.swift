/// The page's script and style sheet, served from the console's own routes (so the pages' content
/// security policy allows no inline script at all).
enum ConsoleAssets {
  /// Every `data-refresh-ms` milliseconds, the page's live part (`#live`) is replaced with the
  /// same route's `fragment=1` answer (already escaped HTML, rendered on the server), and its
  /// `data-refreshes` attribute counts the refreshes.
  static let script = """
    "use strict";
    (function () {
      var live = document.getElementById("live");
      var every = Number(document.body.getAttribute("data-refresh-ms") || 0);
      if (!live || !(every > 0)) { return; }
      function refresh() {
        var url = new URL(window.location.href);
        url.searchParams.set("fragment", "1");
        fetch(url.toString(), { credentials: "same-origin", cache: "no-store" })
          .then(function (response) { return response.text(); })
          .then(function (html) {
            live.innerHTML = html;
            live.setAttribute("data-refreshes", String(Number(live.getAttribute("data-refreshes") || 0) + 1));
          })
          .catch(function () {
            var line = live.querySelector(".refreshed");
            if (line) { line.textContent = "Refresh failed at " + new Date().toISOString() + "; trying again"; }
          })
          .finally(function () { window.setTimeout(refresh, every); });
      }
      window.setTimeout(refresh, every);
    })();
    """

  /// A plain, readable table layout.
  static let styleSheet = """
    body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232a; background: #f7f8fa; }
    header { background: #1d3557; padding: 8px 16px; }
    header a { color: #fff; margin-right: 16px; text-decoration: none; }
    header a.home { font-weight: 600; }
    main { padding: 8px 16px 24px; }
    h1 { font-size: 20px; margin: 8px 0 12px; }
    table { border-collapse: collapse; background: #fff; }
    th, td { border: 1px solid #d9dee4; padding: 4px 8px; text-align: left; vertical-align: top; }
    th { background: #eef1f5; font-weight: 600; }
    td.count, td.throughput, td.age { text-align: right; font-variant-numeric: tabular-nums; }
    td[data-state="failed"] a, dd[data-state="failed"], td.state[data-state="failed"] { color: #b00020; }
    td[data-state="running"] a, dd[data-state="running"] { color: #1565c0; }
    td.error { max-width: 28em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
    .warn { color: #b35c00; font-weight: 600; }
    .refreshed { color: #66707a; font-size: 12px; }
    dl.task { display: grid; grid-template-columns: 9em 1fr; gap: 4px 12px; background: #fff; padding: 12px;
      border: 1px solid #d9dee4; }
    dl.task dt { font-weight: 600; }
    dl.task dd { margin: 0; }
    pre { margin: 0; white-space: pre-wrap; word-break: break-all; background: #f1f3f5; padding: 6px; }
    pre.error { background: #fdecee; }
    form.filter label { margin-right: 12px; }
    form.action { display: inline-block; margin-right: 16px; }
    .notice { color: #1b5e20; } .readonly { color: #66707a; }
    nav.pager a { margin-right: 16px; }
    .paused { background: #b35c00; color: #fff; border-radius: 3px; padding: 0 6px; font-size: 12px; }
    section.queues form.action { display: block; margin: 4px 0; }
    div.tree ul { list-style: none; margin: 0; padding-left: 18px; border-left: 1px solid #d9dee4; }
    div.tree > ul { padding-left: 0; border-left: 0; }
    div.tree li { margin: 2px 0; } div.tree .attempts { color: #66707a; }
    svg.timeline { background: #fff; border: 1px solid #d9dee4; font-size: 11px; max-width: 1000px; }
    svg.timeline text { fill: #1d3557; }
    svg.timeline line.wait { stroke: #b0b8c1; stroke-width: 2; }
    svg.timeline g rect.run { fill: #6c757d; }
    svg.timeline g[data-state="completed"] rect.run { fill: #2e7d32; }
    svg.timeline g[data-state="running"] rect.run { fill: #1565c0; }
    svg.timeline g[data-state="failed"] rect.run { fill: #b00020; }
    svg.timeline g[data-state="cancelled"] rect.run { fill: #b35c00; }
    svg.timeline g[data-state="available"] rect.run { fill: #90a4ae; }
    """
}
