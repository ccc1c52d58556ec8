#!/usr/bin/env bash
# Checks what find-duplicates leaves on the terminal and on standard output:
#
# 1. Standard output that fails: to /dev/full (ENOSPC) it prints one message and exits 1, in
#    each format; to a pipe whose reader stops (| head -c 100) it stays quiet.
# 2. SIGINT and SIGTERM while the report is written: on a generated tree whose report is larger
#    than a pipe holds, the reader reads a little, stops reading (the tool blocks in write(2),
#    in the middle of the report), the signal comes after a random 0-30 ms, then the reader
#    reads the rest: the output must end on a whole line and a whole set (text), a whole set
#    (-0), or be valid JSON or empty (--json), with exit status 128 + the signal (or 0 if the
#    report was complete first). Also with the signal right after the start (before main()
#    blocks the signals, it kills the process, which then wrote nothing).
# 3. The progress line in a real terminal: runs it in a tmux pane of 60 columns on DIR (default
#    /usr/share), captures the screen every 50 ms while it runs, and fails if any capture shows
#    the progress line wider than the pane or a progress line left above the last one (a stray
#    line, as a line that wraps or is not erased would leave).
#
# It installs tmux from Debian's packages if missing (apt-get update once, then apt-get install
# -y; run as root), and needs python3.
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

python3 - "$tool" "$work" <<'PY'
import json, os, random, signal, subprocess, sys, time
tool, work = sys.argv[1], sys.argv[2]
failures = 0
def fail(message):
    global failures
    failures += 1
    print("FAILED:", message)

# A tree whose report is about 700 KB of text: 3000 pairs with long names.
tree = os.path.join(work, "report-tree")
for index in range(3000):
    directory = os.path.join(tree, "d%02d" % (index % 30))
    os.makedirs(directory, exist_ok=True)
    for copy in "ab":
        with open(os.path.join(directory, copy + "-%05d-" % index + "n" * 80), "w") as f:
            f.write("content %d\n" % index)

# 1. /dev/full and a reader that goes away.
before = failures
for flags in ([], ["-0"], ["--json"]):
    with open("/dev/full", "w") as full:
        result = subprocess.run([tool, "-q"] + flags + [tree], stdout=full, stderr=subprocess.PIPE)
    expected = b"find-duplicates: cannot write to standard output: No space left on device\n"
    if result.returncode != 1 or result.stderr != expected:
        fail(f"/dev/full {flags}: exit {result.returncode}, stderr {result.stderr!r}")
    pipeline = subprocess.run(f"'{tool}' -q {' '.join(flags)} '{tree}' | head -c 100 >/dev/null",
                              shell=True, stderr=subprocess.PIPE, executable="/bin/bash")
    if pipeline.stderr:
        fail(f"| head {flags}: stderr {pipeline.stderr!r}")
if failures == before:
    print("standard output: /dev/full is one message and exit 1, a closed pipe stays quiet")

# 2. Signals while the report is written.
def whole(format, output):
    if format == "--json":
        if not output:
            return True
        try:
            json.loads(output)
            return True
        except ValueError:
            return False
    if not output:
        return True
    if format == "-0":
        return output.endswith(b"\0\0")
    # Text: whole lines, and the last set whole (its blank line), unless the summary ended it.
    return output.endswith(b"\n\n") or b"Scanned " in output.rsplit(b"\n\n", 1)[-1]

random.seed(3)
outcomes = {}
before = failures
for format in ("text", "-0", "--json"):
    for number in (signal.SIGINT, signal.SIGTERM):
        for trial in range(8):
            command = [tool, "-q"] + ([] if format == "text" else [format]) + [tree]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            output = b""
            if trial > 0:  # trial 0: the signal right after the start
                output = process.stdout.read1(4096)
                time.sleep(random.uniform(0, 0.03))
            process.send_signal(number)
            output += process.stdout.read()
            status = process.wait()
            outcomes.setdefault((format, number.name), []).append(status)
            # Killed by the signal itself only before main() blocked it: then nothing was written.
            if status not in (0, 128 + number) and not (status == -number and not output):
                fail(f"{format} {number.name}: exit {status}, {len(output)} bytes written")
            if not whole(format, output):
                fail(f"{format} {number.name} trial {trial}: output ends {output[-60:]!r}")
for (format, name), statuses in sorted(outcomes.items()):
    print(f"{name} while writing {format:>6}: exit statuses {sorted(statuses)}")
if failures == before:
    print("every output ended on a whole line and set, or was valid JSON or empty")
sys.exit(1 if failures else 0)
PY

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
