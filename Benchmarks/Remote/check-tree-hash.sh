#!/usr/bin/env bash
# Checks the tree-hash sample (Integrations/JobKitPostgres/Sources/TreeHash) end to end on a
# generated tree:
#   1. in process (no database) == an independent computation of the same Merkle definition
#      (Python's hashlib, below), for every directory (--dirs);
#   2. distributed, 2 worker processes == the same;
#   3. distributed, one of the 2 workers killed with SIGKILL while it runs tasks == the same;
#      its tasks run again elsewhere once their lease expired (rows with attempt > 1 are counted
#      and must exist);
#   4. the durable mode: `tree-hash submit` inserts the tree's job, 2 workers run it, both are
#      killed with SIGKILL once an eighth of the files are hashed (the job running), and 2 new
#      workers start;
#      `tree-hash result` == the same, the job ran again (attempt 2) and every file has one leaf
#      row (the second run attached to the first run's leaves).
# Runs under Integrations/JobKitPostgres/scripts/with-postgres (a throwaway PostgreSQL) unless
# JOBKIT_POSTGRES_URL is set already. CONFIG=release builds in release (default debug);
# FILES=N files in the tree (default 800).
#
#     bash Benchmarks/Remote/check-tree-hash.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
package=Integrations/JobKitPostgres
if [[ -z "${JOBKIT_POSTGRES_URL:-}" ]]; then
  exec bash "$package/scripts/with-postgres" bash "$0" "$@"
fi
config=${CONFIG:-debug}
files=${FILES:-800}

# SCRATCH: the build folder (CI passes the package tests' own, so nothing is built twice).
build=(swift build --package-path "$package" --scratch-path "${SCRATCH:-$package/.build-sample}" -c "$config")
"${build[@]}" --product tree-hash
treehash="$("${build[@]}" --show-bin-path)/tree-hash"

work=$(mktemp -d)
workers=()
declare -A pid_of
cleanup() {
  for pid in "${workers[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

fail() {
  echo "check-tree-hash: FAIL: $*" >&2
  exit 1
}

# The tree: seeded; names with spaces, quotes, semicolons and non-ASCII letters; empty files and
# directories; sizes around SHA-256's 64-byte blocks and its 56-byte padding limit; a symbolic
# link and a FIFO, which the definition leaves out.
python3 - "$work/tree" "$files" <<'EOF'
import os, random, sys
root, count = sys.argv[1], int(sys.argv[2])
rng = random.Random(35)
directories = [root]
os.makedirs(root)
for index in range(count):
    if rng.random() < 0.08:
        directory = os.path.join(rng.choice(directories), rng.choice(["d", "sub dir ", "é-", "x;'"]) + str(index))
        os.makedirs(directory)
        directories.append(directory)
    size = rng.choice([0, 1, 55, 56, 63, 64, 65, 119, 120, 4096, rng.randrange(0, 60000), rng.randrange(0, 600000)])
    name = rng.choice(["file", "a b", "q'uote", "semi;colon", "ünï"]) + f"-{index}.bin"
    with open(os.path.join(rng.choice(directories), name), "wb") as out:
        out.write(rng.randbytes(size))
os.makedirs(os.path.join(root, "empty", "emptier"))
os.symlink("..", os.path.join(root, "link-to-parent"))
os.mkfifo(os.path.join(root, "fifo"))
EOF

# The same Merkle definition, computed independently (see MerkleTree.swift): a file is the
# SHA-256 of its bytes; a directory the SHA-256 of "f|d HEX NAME\0" per entry in byte order of
# the names; links, FIFOs and devices left out.
python3 - "$work/tree" >"$work/expected" <<'EOF'
import hashlib, os, sys
hashes = {}
def tree(path, relative):
    records = []
    with os.scandir(path) as scan:
        entries = sorted(scan, key=lambda entry: os.fsencode(entry.name))
    for entry in entries:
        child = entry.name if relative == "." else relative + "/" + entry.name
        if entry.is_dir(follow_symlinks=False):
            kind, digest = b"d", tree(entry.path, child)
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as data:
                kind, digest = b"f", hashlib.sha256(data.read()).hexdigest()
        else:
            continue
        records.append(kind + b" " + digest.encode() + b" " + os.fsencode(entry.name) + b"\0")
    hashes[relative] = hashlib.sha256(b"".join(records)).hexdigest()
    return hashes[relative]
tree(sys.argv[1], ".")
print(f"{hashes['.']}  .")
for relative in sorted((r for r in hashes if r != "."), key=os.fsencode):
    print(f"{hashes[relative]}  {relative}")
EOF
echo "check-tree-hash: $(find "$work/tree" -type f | wc -l) files, $(wc -l <"$work/expected") directories"

compare() {  # compare LABEL FILE
  if ! cmp -s "$work/expected" "$2"; then
    diff "$work/expected" "$2" | head -20 >&2
    fail "$1: the hashes differ from the independent computation"
  fi
  echo "check-tree-hash: $1: same $(wc -l <"$2") directory hashes, root $(head -c 16 "$2")..."
}

"$treehash" --dirs "$work/tree" >"$work/in-process"
compare "in process" "$work/in-process"

start_worker() {  # start_worker NAME
  "$treehash" worker --database "$JOBKIT_POSTGRES_URL" --queue "$queue" --id "$1" --concurrency 2 --lease 5 \
    2>"$work/$1.log" &
  workers+=($!)
  pid_of[$1]=$!
}

# 2. Two workers, no fault.
queue=check-plain
start_worker plain-1
start_worker plain-2
"$treehash" --dirs --database "$JOBKIT_POSTGRES_URL" --queue "$queue" "$work/tree" >"$work/distributed"
compare "distributed, 2 workers" "$work/distributed"
for pid in "${workers[@]}"; do kill -TERM "$pid"; done
for pid in "${workers[@]}"; do wait "$pid" || fail "a worker exited with status $? after SIGTERM"; done
workers=()

# 3. Two workers, one killed with SIGKILL once the job has hashed some files, at a moment when
#    the database shows it holding tasks (rows it claimed: they are what must run again).
queue=check-kill
start_worker victim
victim=${workers[0]}
start_worker survivor
"$treehash" --dirs --progress --database "$JOBKIT_POSTGRES_URL" --queue "$queue" "$work/tree" \
  >"$work/killed" 2>"$work/job.log" &
job=$!
held() {  # rows the victim claimed and did not finish
  psql "$JOBKIT_POSTGRES_URL" -Atc \
    "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = '$queue' AND owner LIKE 'victim/%' AND state = 'running'"
}
# The victim is frozen (SIGSTOP) before the table is read, so that what it holds cannot change
# between the look and the kill; if it holds nothing, it is thawed and looked at again later.
killed=no
interrupted=0
for _ in $(seq 1200); do
  kill -0 "$job" 2>/dev/null || break
  if grep -q "files hashed" "$work/job.log"; then
    kill -STOP "$victim"
    sleep 0.2  # a statement the victim sent before the stop finishes on the server
    interrupted=$(held)
    if [[ "$interrupted" -gt 0 ]]; then
      kill -9 "$victim"
      wait "$victim" 2>/dev/null || true
      killed=yes
      break
    fi
    kill -CONT "$victim"
  fi
  sleep 0.05
done
kill -0 "$job" 2>/dev/null || fail "the job finished before a worker could be killed (raise FILES)"
[[ $killed == yes ]] || fail "the victim was never seen running a task ($(tail -1 "$work/job.log"))"
echo "check-tree-hash: killed worker 'victim' holding $interrupted tasks, after: $(grep "files hashed" "$work/job.log" | tail -1)"
wait "$job" || { cat "$work/job.log" >&2; fail "the job failed after the kill"; }
compare "distributed, a worker killed mid-run" "$work/killed"
reruns=$(psql "$JOBKIT_POSTGRES_URL" -Atc \
  "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = '$queue' AND attempt > 1")
[[ "$reruns" -ge "$interrupted" ]] || fail "$reruns tasks ran again, fewer than the $interrupted the victim held"
echo "check-tree-hash: $reruns tasks ran again (attempt 2) after the victim's lease expired"
kill -TERM "${workers[1]}"
wait "${workers[1]}" || fail "the surviving worker exited with status $? after SIGTERM"
workers=()

# 4. The durable mode: the job itself on the workers; every worker killed mid-run.
queue=check-durable
durable_start=$SECONDS
start_worker durable-1
start_worker durable-2
key=$("$treehash" submit --database "$JOBKIT_POSTGRES_URL" --queue "$queue" "$work/tree")
[[ -n "$key" && $(wc -l <<<"$key") -eq 1 ]] || fail "submit printed '$key', not one key"
"$treehash" result --dirs --database "$JOBKIT_POSTGRES_URL" --queue "$queue" "$key" \
  >"$work/durable" 2>"$work/result.log" &
result=$!
sql() { psql "$JOBKIT_POSTGRES_URL" -Atc "$1"; }
files_total=$(find "$work/tree" -type f | wc -l)
running=
for _ in $(seq 1200); do
  kill -0 "$result" 2>/dev/null || break
  hashed=$(sql "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = '$queue' AND kind = 'tree-hash.file-sha256'
    AND state = 'completed'")
  running=$(sql "SELECT split_part(owner, '/', 1) FROM jobkit_remote_tasks WHERE queue = '$queue'
    AND kind = 'tree-hash.tree' AND state = 'running'")
  if [[ "$hashed" -ge $((files_total / 8)) && -n "$running" ]]; then
    kill -9 "${pid_of[durable-1]}" "${pid_of[durable-2]}"
    wait "${pid_of[durable-1]}" "${pid_of[durable-2]}" 2>/dev/null || true
    break
  fi
  running=
  sleep 0.05
done
[[ -n "$running" ]] || fail "the job was never seen running with files hashed (raise FILES)"
[[ "$hashed" -lt "$files_total" ]] || fail "every file was hashed before the kill (raise FILES)"
echo "check-tree-hash: killed both workers ('$running' ran the job) after $hashed of $files_total files"
start_worker durable-3
start_worker durable-4
wait "$result" || { cat "$work/result.log" >&2; fail "tree-hash result failed after the kill"; }
compare "durable, every worker killed mid-run" "$work/durable"
attempt=$(sql "SELECT attempt FROM jobkit_remote_tasks WHERE queue = '$queue' AND kind = 'tree-hash.tree'")
[[ "$attempt" -ge 2 ]] || fail "the job's row is at attempt $attempt: it did not run again"
leaves=$(sql "SELECT count(*) FROM jobkit_remote_tasks WHERE queue = '$queue' AND kind = 'tree-hash.file-sha256'")
[[ "$leaves" -eq "$files_total" ]] || fail "$leaves leaf rows for $files_total files"
echo "check-tree-hash: the job ran again (attempt $attempt) and attached to its $leaves leaves" \
  "($((SECONDS - durable_start)) s)"
kill -TERM "${pid_of[durable-3]}" "${pid_of[durable-4]}"
for name in durable-3 durable-4; do
  wait "${pid_of[$name]}" || fail "worker $name exited with status $? after SIGTERM"
done
workers=()
echo "check-tree-hash: 4 passed, 0 failed"
