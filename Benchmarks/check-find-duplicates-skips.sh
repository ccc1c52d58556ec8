#!/usr/bin/env bash
# Checks what find-duplicates leaves out, and how it says so:
#
# 1. A skipped file and a skipped directory are worded alike: as user nobody (root reads
#    everything, whatever the mode), in a temporary tree with a mode-000 file of the same size as
#    two duplicates and a mode-000 directory, both must be listed with the system's reason,
#    "Permission denied", in the text and the JSON output. Run as root (it uses setpriv).
# 2. A file rewritten throughout the run (one byte, in place, by a background writer, so that
#    its content always equals its twin's) is never in a set and is listed as changed.
# 3. One file reached through several roots or spellings (single and ./single/only, /abs/dir and
#    dir, a symbolic link to it with -L) is never its own duplicate or hard link, with and
#    without -H and -L; its real hard link is listed with -H.
# 4. A missing DIR, also the empty string, is named: find-duplicates: '': no such file or
#    directory (exit 2).
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
tool="$work/find-duplicates"
failures=0
fail() {
  echo "FAILED: $*"
  failures=$((failures + 1))
}

# 2. Two sparse 1 GiB files of zeros (comparing them reads 2 GiB, a second or so); a writer
# rewrites the first byte of one with a zero, again and again, from before the run to after it.
mkdir -p "$work/changing"
truncate -s 1G "$work/changing/rewritten" "$work/changing/twin"
(while :; do printf '\0' | dd of="$work/changing/rewritten" bs=1 count=1 conv=notrunc status=none; done) &
writer=$!
"$tool" -q -0 "$work/changing" >"$work/changing.out" 2>"$work/changing.err" || fail "changing: exit $?"
kill "$writer"
wait "$writer" 2>/dev/null || true
if tr '\0' '\n' <"$work/changing.out" | grep -q rewritten; then
  fail "a file rewritten during the run is in a set"
elif ! grep -q "changing/rewritten: changed during the search" "$work/changing.err"; then
  fail "the rewritten file is not listed as changed: $(cat "$work/changing.err")"
else
  echo "changed file: left out of the sets and listed as changed during the search"
fi

# 3. One file, many paths. Relative roots: run from $work.
before=$failures
mkdir -p "$work/same/single" "$work/same/dir"
echo "only file" >"$work/same/single/only"
echo "hard linked" >"$work/same/dir/X"
ln -s X "$work/same/dir/link"
for flags in "" "-H" "-L" "-H -L"; do
  for roots in "single ./single/only" "single single/./only" "$work/same/dir dir" "$work/same/dir/X dir/X ./dir/X"; do
    # shellcheck disable=SC2086 # flags and roots are word lists
    sets=$(cd "$work/same" && "$tool" -q -0 $flags $roots 2>/dev/null | tr -cd '\0' | wc -c)
    [[ $sets -eq 0 ]] || fail "find-duplicates $flags $roots: a file is its own duplicate"
  done
done
ln "$work/same/dir/X" "$work/same/dir/hard"
listed=$(cd "$work/same" && "$tool" -q -H -L -0 "$work/same/dir" dir ./dir/X 2>/dev/null | tr '\0' '\n' | grep -c . || true)
[[ $listed -eq 2 ]] || fail "-H -L with a real hard link: $listed paths listed, expected 2 (X and hard)"
[[ $failures -gt $before ]] || echo "one file reached by several roots and paths: counted once with and without -H and -L"

# 4. Missing roots, the empty string among them.
before=$failures
for root in "" "no such dir"; do
  message=$({ "$tool" "$root" 2>&1 >/dev/null || true; } | head -1)
  status=$("$tool" "$root" >/dev/null 2>&1 || echo $?)
  expected="find-duplicates: '$root': No such file or directory"
  [[ "$message" == "$expected" && $status -eq 2 ]] || fail "root '$root': '$message' (exit $status), expected '$expected' (exit 2)"
done
[[ $failures -gt $before ]] || echo "missing roots: named, also the empty one (find-duplicates: '': No such file or directory)"
[[ $failures -eq 0 ]]
