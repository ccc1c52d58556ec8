#!/usr/bin/env bash
# The tree-hash sample's durable mode (`submit` + `result`: the tree's job runs on a worker)
# against the job in this process with its leaves on the workers (`tree-hash --database`), on
# the same tree, the same 2 workers, interleaved rounds; prints each round and the medians.
# Not in CI (wall times). Needs a debug or release build of tree-hash (CONFIG, default debug).
#
#     bash Benchmarks/Remote/compare-tree-hash-durable.sh [DIR]      (default /usr/include)
#     ROUNDS=5 CONFIG=release bash Benchmarks/Remote/compare-tree-hash-durable.sh DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
package=Integrations/JobKitPostgres
if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash "$package/scripts/with-postgres" bash "$0" "$@"
fi
tree=$(realpath "${1:-/usr/include}")
rounds=${ROUNDS:-5}
build=(swift build --package-path "$package" --scratch-path "${SCRATCH:-$package/.build}" -c "${CONFIG:-debug}")
"${build[@]}" --product tree-hash >/dev/null
treehash="$("${build[@]}" --show-bin-path)/tree-hash"
workers=()
cleanup() { for pid in "${workers[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done; wait; }
trap cleanup EXIT
for name in w1 w2; do
  "$treehash" worker --database "$JOBKIT_POSTGRES_URL" --id "$name" --concurrency 2 2>/dev/null &
  workers+=($!)
done
expected=$("$treehash" "$tree")
now() { date +%s.%N; }
in_process=()
durable=()
for round in $(seq "$rounds"); do
  start=$(now)
  got=$("$treehash" --database "$JOBKIT_POSTGRES_URL" "$tree")
  in_process+=("$(echo "$(now) - $start" | bc)")
  [[ $got == "$expected" ]] || { echo "in-process job: wrong hash" >&2; exit 1; }
  start=$(now)
  key=$("$treehash" submit --database "$JOBKIT_POSTGRES_URL" "$tree")
  got=$("$treehash" result --database "$JOBKIT_POSTGRES_URL" "$key")
  durable+=("$(echo "$(now) - $start" | bc)")
  [[ $got == "$expected" ]] || { echo "durable job: wrong hash" >&2; exit 1; }
  echo "round $round: job in process ${in_process[-1]} s, durable ${durable[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m1=$(median "${in_process[@]}")
m2=$(median "${durable[@]}")
echo "medians over $rounds rounds, $(find "$tree" -type f | wc -l) files: job in process $m1 s, durable $m2 s," \
  "ratio $(echo "scale=2; $m2 / $m1" | bc)"
