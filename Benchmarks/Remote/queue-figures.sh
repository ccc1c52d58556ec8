#!/usr/bin/env bash
# Figures of the queue itself, from JobKitPostgres's test build (QueueBenchmarks), on a throwaway
# PostgreSQL restarted with pg_stat_statements loaded. Not in CI: wall times on a shared machine.
#   - batch enqueue: 10,000 tasks in one `enqueue(_:contentsOf:)` call against 10,000 single
#     `enqueue` calls, statements counted with pg_stat_statements;
#   - finished rows: a worker drains 10,000 no-op tasks on a fresh queue, then again after
#     100,000 finished rows of the same queue; drain rate, and per hot-path statement its mean
#     time and the buffer pages it touches per call (a statement that scanned finished rows
#     would touch more pages after them).
#
#     bash Benchmarks/Remote/queue-figures.sh
#     JOBKIT_QUEUE_FIGURES_TASKS=N JOBKIT_QUEUE_FIGURES_FINISHED=M bash Benchmarks/Remote/queue-figures.sh
set -euo pipefail
script=$(realpath "$0")
package=$(realpath "$(dirname "$script")/../../Integrations/JobKitPostgres")
if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash "$package/scripts/with-postgres" bash "$script" "$@"
fi
if [[ -n "${JOBKIT_POSTGRES_PGCTL:-}" && -n "${JOBKIT_POSTGRES_DATA:-}" ]]; then
  psql "$JOBKIT_POSTGRES_URL" -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
  # shellcheck disable=SC2086 # JOBKIT_POSTGRES_RUNAS is a command prefix of several words
  $JOBKIT_POSTGRES_RUNAS "$JOBKIT_POSTGRES_PGCTL" -D "$JOBKIT_POSTGRES_DATA" -l "${JOBKIT_POSTGRES_LOG:-/dev/null}" \
    -w -t 60 restart >/dev/null
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
JOBKIT_QUEUE_FIGURES=1 swift test --package-path "$package" --filter QueueBenchmarks >"$log" 2>&1 || status=$?
grep -E '^figure:|✘|error:' "$log" || tail -30 "$log"
exit "$status"
