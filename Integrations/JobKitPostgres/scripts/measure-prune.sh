#!/usr/bin/env bash
# measure-prune.sh: the claim latency (p50, p99 of 300 one-row claims) and the table's size of a
# fresh queue, with 200,000 completed rows, after a prune of them, and after a VACUUM, against a
# throwaway PostgreSQL. Not in CI (a minute or two). ROWS=N changes the 200,000.
#     bash Integrations/JobKitPostgres/scripts/measure-prune.sh
set -euo pipefail
cd "$(dirname "$0")/.."
JOBKIT_MEASURE_PRUNE=1 bash scripts/with-postgres \
  swift test --filter PruneMeasureTests 2>&1 | grep -E 'claim p50|passed|failed|error'
