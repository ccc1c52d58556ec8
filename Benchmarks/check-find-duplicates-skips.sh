#!/usr/bin/env bash
# Checks that find-duplicates words a skipped file and a skipped directory alike: as user nobody
# (root reads everything, whatever the mode), in a temporary tree with a mode-000 file of the
# same size as two duplicates and a mode-000 directory, both must be listed with the system's
# reason, "Permission denied", in the text and the JSON output. Run as root (it uses setpriv).
#
#   bash Benchmarks/check-find-duplicates-skips.sh
set -euo pipefail
cd "$(dirname "$0")/.."

swift build -c release --product find-duplicates >/dev/null
work="$(mktemp -d)"
trap 'chmod -R u+rwx "$work"; rm -rf "$work"' EXIT
# A copy of the tool where nobody may run it, and the tree.
cp "$(swift build -c release --show-bin-path)/find-duplicates" "$work/find-duplicates"
mkdir -p "$work/tree/readable" "$work/tree/locked"
for name in readable/a readable/b secret locked/c; do echo hello >"$work/tree/$name"; done
chmod 000 "$work/tree/secret" "$work/tree/locked"
chmod 755 "$work" "$work/tree" "$work/tree/readable" "$work/find-duplicates"
chmod 644 "$work/tree/readable/a" "$work/tree/readable/b"

as_nobody() { (cd / && setpriv --reuid=nobody --regid=nogroup --clear-groups "$work/find-duplicates" "$@"); }
as_nobody "$work/tree" >"$work/text" 2>"$work/errors"
as_nobody --json "$work/tree" >"$work/json" 2>/dev/null
cat "$work/errors"
expected="Skipped 2 unreadable items:
  $work/tree/locked: Permission denied
  $work/tree/secret: Permission denied"
python3 - "$work/json" "$work/tree" <<'PY'
import json, sys
skipped = json.load(open(sys.argv[1]))["skipped"]
wanted = [{"path": sys.argv[2] + "/locked", "reason": "Permission denied"},
          {"path": sys.argv[2] + "/secret", "reason": "Permission denied"}]
assert skipped == wanted, skipped
PY
if [[ "$(cat "$work/errors")" == "$expected" ]]; then
  echo "skip reasons: the file and the directory are both 'Permission denied' (text and JSON)"
else
  echo "skip reasons differ from what was expected:"
  echo "$expected"
  exit 1
fi
