#!/usr/bin/env bash
# Compares find-duplicates with jdupes on the same directories: the sets they find, wall time and
# peak memory (medians of interleaved runs, warm cache), and how long find-duplicates takes to
# stop after Ctrl-C.
#
#   bash Benchmarks/compare-find-duplicates.sh [--runs N] [DIR...]
#
# Without DIR it uses /usr/share, /opt/swift (the toolchain), and three generated trees under
# $TMPDIR: 20,000 small files (40% of them copies), four 200 MB files (three identical, one
# differing in its last byte) and 200,000 small files in 200 directories (30% of them copies). It installs jdupes and GNU time from Debian's packages if missing
# (apt-get update once, then apt-get install -y; run as root), and needs python3.
#
# Options are aligned for the set comparison: both run with -H (hard links are duplicates, every
# path listed) and -0 (NUL-separated), so the sets can be compared path for path. Timing runs use
# each tool's defaults: `jdupes -r -q DIR` and `find-duplicates -q DIR`, output to /dev/null.
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
command -v jdupes >/dev/null || missing+=(jdupes)
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

python3 - "$tool" "$runs" "${directories[@]}" <<'PY'
import os, signal, statistics, subprocess, sys, time
tool, runs, directories = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def sets(output):
    result, current = set(), []
    for item in output.split(b"\0"):
        if item:
            current.append(item)
        elif current:
            result.add(frozenset(current))
            current = []
    return result

def measure(command):
    """Wall seconds and peak RSS in KB of one run, from GNU time."""
    result = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + command,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall, rss = result.stderr.decode().strip().splitlines()[-1].split()
    return float(wall), int(rss)

print(f"{'directory':<40} {'sets':>6}  {'jdupes s':>8} {'ours s':>7} {'time':>6}  {'jdupes MB':>9} {'ours MB':>7} {'memory':>6}")
for directory in directories:
    jdupes_sets = sets(subprocess.run(["jdupes", "-r", "-q", "-H", "-0", directory],
                                      capture_output=True).stdout)
    our_sets = sets(subprocess.run([tool, "-q", "-H", "-0", directory], capture_output=True).stdout)
    agree = "same" if jdupes_sets == our_sets else \
        f"DIFFER: {len(jdupes_sets - our_sets)} only jdupes, {len(our_sets - jdupes_sets)} only ours"
    jdupes_command = ["jdupes", "-r", "-q", directory]
    our_command = [tool, "-q", directory]
    for command in (jdupes_command, our_command):  # warm the cache
        measure(command)
    jdupes_runs, our_runs = [], []
    for _ in range(runs):  # interleaved
        jdupes_runs.append(measure(jdupes_command))
        our_runs.append(measure(our_command))
    jt = statistics.median(r[0] for r in jdupes_runs)
    ot = statistics.median(r[0] for r in our_runs)
    jm = statistics.median(r[1] for r in jdupes_runs) / 1024
    om = statistics.median(r[1] for r in our_runs) / 1024
    print(f"{directory:<40} {len(our_sets):>6}  {jt:>8.2f} {ot:>7.2f} {ot / max(jt, 0.005):>5.2f}x  "
          f"{jm:>9.1f} {om:>7.1f} {om / jm:>5.2f}x  sets: {agree}")

# Ctrl-C in each phase: the tool runs with standard error on a pseudo-terminal; once its progress
# line shows the phase, SIGINT follows after a random 0-300 ms, and the time until the process
# exited with 130 is measured. Scanning on the generated trees and /usr together; first blocks
# on the 200,000 files; hashing on three sparse 16 GiB files; comparing on two (reading zeros:
# seconds of each phase).
import fcntl, pty, random, select, struct, termios
work = os.path.join(os.environ.get("TMPDIR", "/tmp"), "compare-find-duplicates")
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
