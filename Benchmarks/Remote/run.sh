#!/usr/bin/env bash
# Runs remote-bench (this package) against a throwaway PostgreSQL started by
# Integrations/JobKitPostgres/scripts/with-postgres, and prints its markdown table.
#
#     bash Benchmarks/Remote/run.sh                       10,000 tasks, 1/2/4 workers, release
#     N=500 SAMPLES=50 CONFIG=debug bash Benchmarks/Remote/run.sh
#                                                         the smoke run: every task completes
#     REMOTE_BENCH=path/to/remote-bench bash Benchmarks/Remote/run.sh
#                                                         a binary built before (no build): to
#                                                         compare two versions on one machine
#     SCRATCH=DIR ...                                     build in DIR (CI shares JobKitPostgres's
#                                                         build folder: postgres-nio built once)
# The benchmark's own settings (ROUNDS, DURABILITY, BREAKDOWN, ...) are in Sources/RemoteBench/Bench.swift.
#
# The server is restarted once with pg_stat_statements loaded, so that the statements per task
# are counted exactly. Timings are wall clock on a shared machine: noisy, not a test.
set -euo pipefail
script=$(realpath "$0")
build=(swift build -c "${CONFIG:-release}" --product remote-bench)
if [[ -n "${SCRATCH:-}" ]]; then
  SCRATCH=$(realpath "$SCRATCH")
  export SCRATCH
  build+=(--scratch-path "$SCRATCH")
fi
cd "$(dirname "$script")"
if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash ../../Integrations/JobKitPostgres/scripts/with-postgres bash "$script" "$@"
fi

if [[ -n "${JOBKIT_POSTGRES_PGCTL:-}" && -n "${JOBKIT_POSTGRES_DATA:-}" ]]; then
  psql "$JOBKIT_POSTGRES_URL" -qc "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
  # shellcheck disable=SC2086 # JOBKIT_POSTGRES_RUNAS is a command prefix of several words
  $JOBKIT_POSTGRES_RUNAS "$JOBKIT_POSTGRES_PGCTL" -D "$JOBKIT_POSTGRES_DATA" -l "${JOBKIT_POSTGRES_LOG:-/dev/null}" \
    -w -t 60 restart >/dev/null
  if [[ "${BREAKDOWN:-}" == 1 ]]; then
    # The breakdown's server time per statement counts planning too (a setting of the loaded
    # extension: set once it is loaded).
    psql "$JOBKIT_POSTGRES_URL" -qc "ALTER SYSTEM SET pg_stat_statements.track_planning = on" \
      -c "SELECT pg_reload_conf()" >/dev/null
  fi
fi

if [[ -n "${REMOTE_BENCH:-}" ]]; then
  exec "$REMOTE_BENCH"
fi
"${build[@]}"
"$("${build[@]}" --show-bin-path)/remote-bench"
