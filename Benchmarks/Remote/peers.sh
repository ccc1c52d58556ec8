#!/usr/bin/env bash
# Runs the Python peers of JobKitPostgres (peers.py: drain, end to end, idle latency) against a
# throwaway PostgreSQL started by Integrations/JobKitPostgres/scripts/with-postgres, and prints
# a markdown table. Not in CI: it installs from PyPI.
#
#     bash Benchmarks/Remote/peers.sh
#     N=2000 ROUNDS=3 WORKERS="1 2 4" PEERS="pgqueuer procrastinate" bash Benchmarks/Remote/peers.sh
#
# The pinned packages go into a virtual environment in Benchmarks/Remote/.build-peers/ (ignored
# by git), made with the first Python 3.12 or newer found (oban needs 3.12; PYTHON=... to
# choose). DURABILITY=on (the default: fsync, synchronous_commit and full_page_writes on, what a
# user runs) or off (as the throwaway server starts).
set -euo pipefail
script=$(realpath "$0")
cd "$(dirname "$script")"
if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash ../../Integrations/JobKitPostgres/scripts/with-postgres bash "$script" "$@"
fi

venv=.build-peers/venv
packages=("pgqueuer==1.6.0" "procrastinate==3.10.0" "oban==0.7.0" "dbos==3.4.0" "asyncpg" "psycopg[binary]")
if [[ ! -x "$venv/bin/python" ]]; then
  python=${PYTHON:-}
  if [[ -z "$python" ]]; then
    for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 python3; do
      if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
        python=$candidate
        break
      fi
    done
  fi
  if [[ -z "$python" ]]; then
    echo "peers.sh: needs Python 3.12 or newer (set PYTHON)" >&2
    exit 1
  fi
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install -q "${packages[@]}"

value=${DURABILITY:-on}
for setting in fsync synchronous_commit full_page_writes; do
  psql "$JOBKIT_POSTGRES_URL" -qc "ALTER SYSTEM SET $setting = $value"
done
psql "$JOBKIT_POSTGRES_URL" -qc "SELECT pg_reload_conf()" >/dev/null
echo "peers.sh: durability $value" >&2

DSN="$JOBKIT_POSTGRES_URL" "$venv/bin/python" peers.py
