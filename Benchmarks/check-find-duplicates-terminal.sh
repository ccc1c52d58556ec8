#!/usr/bin/env bash
# Checks find-duplicates' progress line in a real terminal: runs it in a tmux pane of 60 columns
# on DIR (default /usr/share), captures the screen every 50 ms while it runs, and fails if any
# capture shows the progress line wider than the pane or a progress line left above the last one
# (a stray line, as a line that wraps or is not erased would leave). It installs tmux from
# Debian's packages if missing (apt-get update once, then apt-get install -y; run as root).
#
#   bash Benchmarks/check-find-duplicates-terminal.sh [--columns N] [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

columns=60
directory=/usr/share
while [[ $# -gt 0 ]]; do
  case "$1" in
    --columns) columns="$2"; shift 2 ;;
    *) directory="$1"; shift ;;
  esac
done

if ! command -v tmux >/dev/null; then
  echo "installing tmux from Debian's packages"
  apt-get update -qq
  apt-get install -y -qq tmux >/dev/null
fi

swift build -c release --product find-duplicates >/dev/null
tool="$(swift build -c release --show-bin-path)/find-duplicates"
work="$(mktemp -d)"
session="fd-terminal-check-$$"
trap 'tmux kill-session -t "$session" 2>/dev/null || true; rm -rf "$work"' EXIT

# Standard output (the report) goes to a file: the pane shows only the progress line on
# standard error, and then the shell prompt's marker.
tmux -f /dev/null new-session -d -s "$session" -x "$columns" -y 20 \
  "'$tool' '$directory' >'$work/report'; echo \"exit \$?\" >'$work/done'; sleep 3600"
captures=0
failures=0
deadline=$((SECONDS + 600))
while [[ ! -e "$work/done" && $SECONDS -lt $deadline ]]; do
  tmux capture-pane -p -t "$session" >"$work/screen"
  captures=$((captures + 1))
  grep . "$work/screen" >>"$work/seen" || true
  # Non-empty lines: there must be at most one, at most columns - 1 wide.
  lines=$(grep -c . "$work/screen" || true)
  widest=$(awk '{ if (length($0) > w) w = length($0) } END { print w + 0 }' "$work/screen")
  if [[ $lines -gt 1 || $widest -ge $columns ]]; then
    failures=$((failures + 1))
    echo "capture $captures: $lines lines, widest $widest columns:"
    sed 's/^/  | /' "$work/screen"
  fi
  sleep 0.05
done
tmux capture-pane -p -t "$session" >"$work/screen"
leftover=$(grep -c . "$work/screen" || true)
if [[ -s "$work/seen" ]]; then
  echo "progress lines seen: $(sort -u "$work/seen" | wc -l) different, the widest:"
  awk '{ print length($0) " columns: " $0 }' "$work/seen" | sort -n | tail -1 | sed 's/^/  /'
fi
echo "find-duplicates $directory in $columns columns: $(cat "$work/done" 2>/dev/null || echo 'did not finish'),"\
  "$captures screens captured, $failures with a stray or too wide line, $leftover lines left on screen at the end"
[[ $failures -eq 0 && $leftover -eq 0 && -e "$work/done" ]]
