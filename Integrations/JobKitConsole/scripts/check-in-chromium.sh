#!/usr/bin/env bash
# Checks jobkit-console in a real browser: a throwaway PostgreSQL (with-postgres), tasks seeded
# through JobKitPostgres's API (jobkit-console-seed), the console started on 127.0.0.1 with a
# free port and a token, and Debian's chromium, headless (installed with apt-get if missing):
#  - the dashboard's DOM holds the queues' counts, also after the page's script refreshed it;
#  - a task page shows the stored error `<script>alert('pwned')</script>` as text (no script ran);
#  - a retry without the token, or with it from another origin, is refused (403); with the token
#    (a form post from the console's origin, as its page sends) it puts the task back, and a
#    worker then completes it;
#  - the database URL's password shows on no page and in no log;
#  - a durable task's page lists its children and draws their timeline;
#  - screenshots of the dashboard, of a task page and of a durable task's page go to
#    .build-console-artifacts/.
#
#   bash Integrations/JobKitConsole/scripts/check-in-chromium.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."

if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash Integrations/JobKitPostgres/scripts/with-postgres bash "$0" "$@"
fi

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "check-in-chromium: installing chromium (apt-get)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  browser="$(command -v chromium)"
fi
"$browser" --version

package=Integrations/JobKitConsole
# SCRATCH: the build folder to use (CI shares JobKitPostgres's); the package's own by default.
build=(swift build --package-path "$package")
if [[ -n "${SCRATCH:-}" ]]; then build+=(--scratch-path "$SCRATCH"); fi
"${build[@]}" --product jobkit-console >/dev/null
"${build[@]}" --product jobkit-console-seed >/dev/null
bin="$("${build[@]}" --show-bin-path)"
artifacts=.build-console-artifacts
mkdir -p "$artifacts"
work="$(mktemp -d)"
console_pid=""
cleanup() {
  if [[ -n "$console_pid" ]] && kill -0 "$console_pid" 2>/dev/null; then kill -TERM "$console_pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "check-in-chromium: $*" >&2
  exit 1
}

# The socket's trust authentication ignores a password: one in the URL must still show nowhere.
password="hunter2-not-shown"
database_url="${JOBKIT_POSTGRES_URL/postgres@/postgres:$password@}"

seeded="$(timeout 120 "$bin/jobkit-console-seed" seed)"
echo "$seeded"
failed_id="$(sed -n 's/^failed-task=//p' <<<"$seeded")"
[[ "$failed_id" =~ ^[0-9]+$ ]] || fail "the seed printed no failed task"
durable_id="$(sed -n 's/^durable-task=//p' <<<"$seeded")"
[[ "$durable_id" =~ ^[0-9]+$ ]] || fail "the seed printed no durable task"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
token="check-$RANDOM$RANDOM"
base="http://127.0.0.1:$port"
JOBKIT_CONSOLE_TOKEN="$token" "$bin/jobkit-console" --database "$database_url" --listen "127.0.0.1:$port" \
  >"$work/console.log" 2>&1 &
console_pid=$!
for _ in $(seq 1 100); do
  curl -sf --max-time 5 -o /dev/null "$base/" && break
  kill -0 "$console_pid" 2>/dev/null || { cat "$work/console.log" >&2; fail "jobkit-console exited"; }
  sleep 0.2
done
curl -sf --max-time 5 -o /dev/null "$base/" || fail "jobkit-console does not answer on $base"

flags=(--headless --no-sandbox --disable-gpu --no-first-run --no-default-browser-check --hide-scrollbars
  --user-data-dir="$work/profile" --enable-logging=stderr --v=0)
# --virtual-time-budget lets the page's refresh timer fire: the DOM is the refreshed one.
dump() {
  timeout 90 "$browser" "${flags[@]}" --virtual-time-budget=5000 --dump-dom "$1" >"$2" 2>"$2.log" ||
    { cat "$2.log" >&2; fail "chromium could not render $1"; }
  if grep -E 'Uncaught|Refused to|Failed to load' "$2.log"; then fail "$1 logged an error (above)"; fi
}

# count QUEUE KIND STATE FILE: the dashboard's count in that cell.
count() {
  python3 - "$@" <<'PY'
import re, sys
queue, kind, state, path = sys.argv[1:]
html = open(path).read()
row = re.search(r'<tr data-queue="%s" data-kind="%s"[^>]*>(.*?)</tr>' % (re.escape(queue), re.escape(kind)), html, re.S)
cell = row and re.search(r'data-state="%s"><a href="[^"]*">(\d+)</a>' % state, row.group(1))
print(cell.group(1) if cell else "none")
PY
}

dump "$base/" "$work/dashboard.html"
grep -q 'Refreshed at' "$work/dashboard.html" || fail "the dashboard says nothing of its refresh"
grep -Eq 'id="live" data-refreshes="[1-9]' "$work/dashboard.html" || fail "the dashboard's script did not refresh it"
echo "dashboard: refreshed by its script without a reload"
expect_count() {
  local got
  got="$(count "$1" "$2" "$3" "$work/dashboard.html")"
  [[ "$got" == "$4" ]] || fail "dashboard: $1/$2 $3 is $got, expected $4"
  echo "dashboard: $1/$2 $3 = $got"
}
expect_count console-demo resize-image completed 5
expect_count console-demo send-email failed 1
expect_count console-backlog report available 3

task="$base/tasks/$failed_id"
dump "$task" "$work/task.html"
grep -q "<pre class=\"error\">&lt;script&gt;alert('pwned')&lt;/script&gt;</pre>" "$work/task.html" ||
  fail "the task page does not show the stored error as text"
if grep -q "<script>alert" "$work/task.html"; then fail "the stored error became a script element"; fi
grep -q '&lt;b&gt;mail-1&lt;/b&gt;' "$work/task.html" || fail "the task page does not show its key as text"
echo "task page: the error and the key render as text"

shoot() {
  timeout 90 "$browser" "${flags[@]}" --window-size="$3" --screenshot="$2" "$1" >/dev/null 2>"$work/shot.log" || true
  [[ "$(head -c 8 "$2" 2>/dev/null | od -An -tx1 | tr -d ' \n')" == "89504e470d0a1a0a" ]] ||
    { cat "$work/shot.log" >&2; fail "no screenshot of $1"; }
  echo "screenshot: $2 ($(stat -c %s "$2") bytes)"
}
shoot "$base/" "$artifacts/dashboard.png" 1280,420
shoot "$task" "$artifacts/task.png" 1000,760

dump "$base/tasks/$durable_id" "$work/task-tree.html"
[[ "$(grep -o '<li data-id="[0-9]*"><a href="[^"]*">pack-item</a>' "$work/task-tree.html" | wc -l)" == 2 ]] ||
  fail "the durable task's page does not list its two children"
[[ "$(grep -o '<g class="bar" data-id="[0-9]*" data-state="completed">' "$work/task-tree.html" | wc -l)" == 3 ]] ||
  fail "the durable task's timeline has not three completed bars"
echo "durable task page: two children in the tree, three bars in the timeline"
shoot "$base/tasks/$durable_id" "$artifacts/task-tree.png" 1000,760

# post TOKEN-FIELD ORIGIN: the status of a retry as the page's form sends it.
post() {
  curl -s --max-time 20 -o /dev/null -w '%{http_code}' -X POST -H "Origin: $2" \
    -H 'Content-Type: application/x-www-form-urlencoded' --data "token=$1&action=retry" "$task/retry"
}
[[ "$(post "" "$base")" == 403 ]] || fail "a retry without the token was not refused"
[[ "$(post "$token" "http://evil.example")" == 403 ]] || fail "a retry from another origin was not refused"
dump "$task" "$work/task-refused.html"
grep -q 'data-state="failed"' "$work/task-refused.html" || fail "a refused retry changed the task"
echo "retry: refused without the token and from another origin"
[[ "$(post "$token" "$base")" == 303 ]] || fail "a retry with the token was not accepted"
dump "$task" "$work/task-retried.html"
grep -Eq 'data-state="(available|running)"' "$work/task-retried.html" || fail "the retried task is not back"
timeout 120 "$bin/jobkit-console-seed" complete '<b>mail-1</b>'
dump "$task" "$work/task-completed.html"
grep -q 'data-state="completed"' "$work/task-completed.html" || fail "the retried task did not complete"
echo "retry: with the token the task went back and a worker completed it"

# queue ACTION TOKEN: the status of a pause or resume as the dashboard's form sends it.
queue() {
  curl -s --max-time 20 -o /dev/null -w '%{http_code}' -X POST -H "Origin: $base" \
    -H 'Content-Type: application/x-www-form-urlencoded' --data "queue=console-demo&token=$2" "$base/queues/$1"
}
[[ "$(queue pause "")" == 403 ]] || fail "a pause without the token was not refused"
[[ "$(queue pause "$token")" == 303 ]] || fail "a pause with the token was not accepted"
dump "$base/" "$work/dashboard-paused.html"
grep -q '<tr data-queue="console-demo" data-kind="resize-image" data-paused="true">' "$work/dashboard-paused.html" ||
  fail "the dashboard does not show console-demo paused"
grep -q 'value="resume"' "$work/dashboard-paused.html" || fail "the dashboard has no resume button"
[[ "$(queue resume "$token")" == 303 ]] || fail "a resume with the token was not accepted"
echo "pause: the dashboard shows the paused queue; resumed"
[[ "$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -H 'Host: evil.example' "$base/")" == 421 ]] ||
  fail "a request for another host name was answered"
echo "host: a request for another host name gets 421 (DNS rebinding)"

kill -TERM "$console_pid"
for _ in $(seq 1 150); do kill -0 "$console_pid" 2>/dev/null || break; sleep 0.2; done
kill -0 "$console_pid" 2>/dev/null && fail "jobkit-console still runs 30 s after SIGTERM"
wait "$console_pid" || fail "jobkit-console did not stop cleanly on SIGTERM"
console_pid=""
if grep -rq "$password" "$work"/*.html "$work/console.log"; then fail "the database password shows"; fi
echo "the password shows on no page and in no log; jobkit-console stopped on SIGTERM"
echo "check-in-chromium: ok"
