#!/usr/bin/env bash
# Compares find-duplicates with jdupes, rdfind and rmlint on the same directories: the sets they
# find, wall time and peak memory (medians of interleaved runs, warm cache), and how long
# find-duplicates takes to stop after Ctrl-C.
#
#   bash Benchmarks/compare-find-duplicates.sh [--runs N] [DIR...]
#
# Without DIR it uses /usr/share, /opt/swift (the toolchain), and three generated trees under
# $TMPDIR: 20,000 small files (40% of them copies), four 200 MB files (three identical, one
# differing in its last byte) and 200,000 small files in 200 directories (30% of them copies). It
# installs jdupes, rdfind, rmlint and GNU time from Debian's packages if missing (apt-get update
# once, then apt-get install -y; run as root), and needs python3.
#
# Sets: jdupes and find-duplicates both run with -H (hard links are duplicates, every path
# listed) and -0 (NUL-separated), and are compared path for path. rdfind and rmlint list hard
# links differently, so their sets are compared with find-duplicates' default sets as sets of
# files (device and inode; a set that names fewer than two files is dropped).
# Timing runs, output to /dev/null: `jdupes -r -q DIR`, `rdfind -makeresultsfile false DIR`,
# `rmlint -T df --hidden --without-fiemap --no-backup -o fdupes:FILE DIR` (duplicate files
# only, hidden files included, as the others; without fiemap, which rmlint uses by default to
# order reads by disk offset and which fsyncs every file: 5-50x slower here; FILE in $TMPDIR,
# never /dev/null, which rmlint would rename as a backup) and `find-duplicates -q DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=7
directories=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    *) directories+=("$1"); shift ;;
  esac
done

missing=()
for package in jdupes rdfind rmlint; do
  command -v "$package" >/dev/null || missing+=("$package")
done
[[ -x /usr/bin/time ]] || missing+=(time)
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "installing ${missing[*]} from Debian's packages"
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

echo "building find-duplicates (release)"
swift build -c release --product find-duplicates >/dev/null
tool="$(swift build -c release --show-bin-path)/find-duplicates"
work="${TMPDIR:-/tmp}/compare-find-duplicates"
mkdir -p "$work"

if [[ ${#directories[@]} -eq 0 ]]; then
  python3 - "$work" <<'PY'
import os, random, sys
root = sys.argv[1]
random.seed(42)
small = os.path.join(root, "small-files")
if not os.path.isdir(small):
    pool = [os.urandom(random.randint(100, 8192)) for _ in range(3000)]
    for i in range(20000):
        d = os.path.join(small, "d%03d" % (i % 100))
        os.makedirs(d, exist_ok=True)
        data = random.choice(pool) if random.random() < 0.4 else os.urandom(random.randint(100, 8192))
        with open(os.path.join(d, "f%05d" % i), "wb") as f:
            f.write(data)
many = os.path.join(root, "many-files")
if not os.path.isdir(many):
    pool = [os.urandom(random.randint(100, 4096)) for _ in range(5000)]
    for i in range(200000):
        d = os.path.join(many, "d%03d" % (i // 1000))
        os.makedirs(d, exist_ok=True)
        data = random.choice(pool) if random.random() < 0.3 else os.urandom(random.randint(100, 4096))
        with open(os.path.join(d, "f%04d" % (i % 1000)), "wb") as f:
            f.write(data)
large = os.path.join(root, "large-files")
if not os.path.isdir(large):
    os.makedirs(large)
    block = os.urandom(1 << 20)
    for name in "abcd":
        with open(os.path.join(large, name), "wb") as f:
            for _ in range(200):
                f.write(block)
            if name == "d":
                f.seek(-1, 2)
                f.write(b"x")
PY
  directories=(/usr/share /opt/swift "$work/small-files" "$work/large-files" "$work/many-files")
fi

python3 - "$tool" "$runs" "$work" "${directories[@]}" <<'PY'
import json, os, signal, statistics, subprocess, sys, time
tool, runs, work, directories = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]

def sets(output):
    result, current = set(), []
    for item in output.split(b"\0"):
        if item:
            current.append(item)
        elif current:
            result.add(frozenset(current))
            current = []
    return result

def files(groups):
    """Each group of paths as the set of files (device, inode) it names, if two or more."""
    result = set()
    for group in groups:
        ids = set()
        for path in group:
            try:
                status = os.lstat(path)
                ids.add((status.st_dev, status.st_ino))
            except OSError:
                pass
        if len(ids) >= 2:
            result.add(frozenset(ids))
    return result

def rdfind_files(directory):
    results = os.path.join(work, "rdfind-results.txt")
    subprocess.run(["rdfind", "-outputname", results, directory], stdout=subprocess.DEVNULL, check=True)
    groups = {}
    with open(results, "rb") as f:
        for line in f:
            if line.startswith(b"#"):
                continue
            fields = line.rstrip(b"\n").split(b" ", 7)
            groups.setdefault(abs(int(fields[1])), set()).add((int(fields[4]), int(fields[5])))
    return {frozenset(ids) for ids in groups.values() if len(ids) >= 2}

def rmlint_files(directory):
    results = os.path.join(work, "rmlint.json")
    subprocess.run(["rmlint", "-T", "df", "--hidden", "--without-fiemap", "--no-backup", "-o", "json:" + results,
                    directory],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    groups = {}
    for item in json.load(open(results)):
        if isinstance(item, dict) and item.get("type") == "duplicate_file":
            groups.setdefault((item["size"], item["checksum"]), []).append(item["path"])
    return files(groups.values())

def agreement(theirs, ours):
    if theirs == ours:
        return "same"
    return f"DIFFER: {len(theirs - ours)} only theirs, {len(ours - theirs)} only ours"

def measure(command):
    """Wall seconds and peak RSS in KB of one run, from GNU time."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall, rss = result.stderr.decode().strip().splitlines()[-1].split()
    return float(wall), int(rss)

names = ("jdupes", "rdfind", "rmlint", "ours")
print(f"{'directory':<34} {'sets':>5}  " + " ".join(f"{name + ' s':>8}" for name in names) + f" {'time':>6}  "
      + " ".join(f"{name + ' MB':>9}" for name in names) + f" {'memory':>6}  sets (jdupes, rdfind, rmlint)")
for directory in directories:
    jdupes_sets = sets(subprocess.run(["jdupes", "-r", "-q", "-H", "-0", directory],
                                      capture_output=True).stdout)
    our_linked_sets = sets(subprocess.run([tool, "-q", "-H", "-0", directory], capture_output=True).stdout)
    our_sets = sets(subprocess.run([tool, "-q", "-0", directory], capture_output=True).stdout)
    our_files = files(our_sets)
    agree = ", ".join((agreement(jdupes_sets, our_linked_sets), agreement(rdfind_files(directory), our_files),
                       agreement(rmlint_files(directory), our_files)))
    commands = (["jdupes", "-r", "-q", directory], ["rdfind", "-makeresultsfile", "false", directory],
                # Never -o FORMAT:/dev/null: rmlint renames an existing output file out of the
                # way as a backup, /dev/null too, and then writes a regular file in its place.
                ["rmlint", "-T", "df", "--hidden", "--without-fiemap", "--no-backup",
                 "-o", "fdupes:" + os.path.join(work, "rmlint.out"), directory],
                [tool, "-q", directory])
    for command in commands:  # warm the cache
        measure(command)
    results = [[] for _ in commands]
    for _ in range(runs):  # interleaved
        for result, command in zip(results, commands):
            result.append(measure(command))
    times = [statistics.median(r[0] for r in result) for result in results]
    memory = [statistics.median(r[1] for r in result) / 1024 for result in results]
    shown = directory if len(directory) <= 34 else "…" + directory[-33:]
    print(f"{shown:<34} {len(our_linked_sets):>5}  " + " ".join(f"{t:>8.2f}" for t in times)
          + f" {times[3] / max(times[0], 0.005):>5.2f}x  " + " ".join(f"{m:>9.1f}" for m in memory)
          + f" {memory[3] / memory[0]:>5.2f}x  {agree}", flush=True)

# Ctrl-C in each phase: the tool runs with standard error on a pseudo-terminal; once its progress
# line shows the phase, SIGINT follows after a random 0-300 ms, and the time until the process
# exited with 130 is measured. Scanning on the generated trees and /usr together; first blocks
# on the 200,000 files; hashing on three sparse 16 GiB files; comparing on two (reading zeros:
# seconds of each phase).
import fcntl, pty, random, select, struct, termios
for name, count in (("sparse", 2), ("sparse3", 3)):
    os.makedirs(os.path.join(work, name), exist_ok=True)
    for index in range(count):
        with open(os.path.join(work, name, "abc"[index]), "wb") as f:
            f.truncate(16 << 30)
trees = [os.path.join(work, name) for name in ("many-files", "small-files")]
phases = [("[1/4]", "scanning", trees + ["/usr"]), ("[2/4]", "first blocks", trees[:1]),
          ("[3/4]", "hashing", [os.path.join(work, "sparse3")]),
          ("[4/4]", "comparing", [os.path.join(work, "sparse")])]
random.seed(1)
for marker, phase, targets in phases:
    if not all(os.path.isdir(target) for target in targets):
        continue
    latencies = []
    for _ in range(12):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 20, 100, 0, 0))
        process = subprocess.Popen([tool] + targets, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen, screen, deadline = None, b"", time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if select.select([master], [], [], 0.005)[0]:
                try:
                    screen += os.read(master, 65536)
                except OSError:
                    break
            if seen is None and marker.encode() in screen:
                seen, delay = time.monotonic(), random.uniform(0, 0.3)
            if seen is not None and time.monotonic() >= seen + delay:
                sent = time.monotonic()
                process.send_signal(signal.SIGINT)
                if process.wait() == 130:
                    latencies.append((time.monotonic() - sent) * 1000)
                break
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    if latencies:
        print(f"Ctrl-C while {phase:<12}: exit 130 after median {statistics.median(latencies):5.1f} ms, "
              f"max {max(latencies):5.1f} ms ({len(latencies)} interrupts)")
PY
