#!/usr/bin/env bash
# Checks JobTimeline's HTML page in a real browser: runs `find-duplicates --timeline` on a real
# tree, renders the page with Debian's chromium, headless, and fails if the page logged a script
# error, if its DOM has no SVG timeline or no task bars, or if no screenshot came out. Installs
# chromium with apt-get if it is missing (run as root, as CI does).
#
#   bash Benchmarks/check-timeline.sh [--screenshot PNG] [DIR]     (DIR: default /usr/share)
#
# --screenshot PNG keeps the rendered page (the README's picture is made this way:
# `bash Benchmarks/check-timeline.sh --screenshot Documentation/find-duplicates-timeline.png`).
set -euo pipefail
cd "$(dirname "$0")/.."

keep=""
if [[ "${1:-}" == "--screenshot" ]]; then
  keep="$2"
  shift 2
fi
tree="${1:-/usr/share}"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "check-timeline: installing chromium (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  browser="$(command -v chromium)"
fi
"$browser" --version

swift build -c release --product find-duplicates >/dev/null
tool="$(swift build -c release --show-bin-path)/find-duplicates"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$tool" -q --timeline "$work/timeline.html" "$tree" >"$work/report" 2>"$work/skipped"
"$tool" -q --timeline "$work/trace.json" "$tree" >/dev/null 2>&1
python3 -c 'import json, sys; events = json.load(open(sys.argv[1]))["traceEvents"]; \
  assert any(e["ph"] == "X" and e.get("cat") != "job" for e in events), "no task slices in the trace"' "$work/trace.json"
bars_written="$(grep -o '<rect class="task' "$work/timeline.html" | wc -l)"
echo "find-duplicates $tree: $(tail -n 1 "$work/report"); $bars_written task bars written"

# The browser: a profile of its own, no first-run work, errors logged to stderr.
flags=(--headless --no-sandbox --disable-gpu --no-first-run --no-default-browser-check --hide-scrollbars
  --user-data-dir="$work/profile" --enable-logging=stderr --v=0)
"$browser" "${flags[@]}" --dump-dom "file://$work/timeline.html" >"$work/dom.html" 2>"$work/dom.log" || {
  cat "$work/dom.log" >&2
  echo "check-timeline: chromium failed to render the page" >&2
  exit 1
}
status=0
# A script error (there is no script in the page: any error is one too many) or a failed load.
if grep -E 'Uncaught|CONSOLE\(|ERR_FILE_NOT_FOUND|Failed to load' "$work/dom.log"; then
  echo "check-timeline: the page logged an error (above)" >&2
  status=1
fi
bars="$(grep -o '<rect class="task' "$work/dom.html" | wc -l)"
titles="$(grep -o '<title>' "$work/dom.html" | wc -l)"
if ! grep -q '<svg class="timeline"' "$work/dom.html" || [[ "$bars" -eq 0 ]]; then
  echo "check-timeline: the rendered page has no timeline or no bars" >&2
  status=1
fi
if [[ "$bars" -ne "$bars_written" ]]; then
  echo "check-timeline: $bars_written bars written but $bars rendered" >&2
  status=1
fi
echo "rendered: $bars task bars, $titles titles"

# The screenshot: as wide as the page, as tall as the timeline (capped).
height="$(grep -o 'svg class="timeline"[^>]*height="[0-9.]*"' "$work/timeline.html" | grep -o '[0-9.]*"$' | tr -d '"')"
height=$(( ${height%.*} + 150 ))
(( height > 4000 )) && height=4000
"$browser" "${flags[@]}" --window-size="1420,$height" --screenshot="$work/timeline.png" \
  "file://$work/timeline.html" >/dev/null 2>"$work/shot.log" || true
if [[ ! -s "$work/timeline.png" ]] || [[ "$(head -c 8 "$work/timeline.png" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]]; then
  cat "$work/shot.log" >&2
  echo "check-timeline: no screenshot" >&2
  status=1
else
  echo "screenshot: 1420x$height, $(stat -c %s "$work/timeline.png") bytes"
  if [[ -n "$keep" ]]; then
    mkdir -p "$(dirname "$keep")"
    cp "$work/timeline.png" "$keep"
    echo "kept as $keep"
  fi
fi
[[ $status -eq 0 ]] && echo "check-timeline: ok"
exit $status
