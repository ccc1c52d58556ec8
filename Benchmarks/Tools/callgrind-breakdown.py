#!/usr/bin/env python3
"""Where a task's instructions go: the marginal cost per task between two callgrind runs of one
jobkit-bench variant (N1 and N2 tasks), per function, grouped by who spends them.

    cd Benchmarks && swift build -c release --product jobkit-bench
    for n in 20000 40000; do
      SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --fair-sched=yes \
        --callgrind-out-file=cg-job-work-$n.out .build/release/jobkit-bench --child job-work $n
    done
    python3 Tools/callgrind-breakdown.py cg-job-work-20000.out cg-job-work-40000.out 20000

Prints (1) the exclusive instructions per task by category (they add up to the total), with the
largest functions of each, and (2) the inclusive instructions per task of the entry points that
matter for a job's task (corelibs OperationQueue, KVO, metadata lookups, JobKit's task types).
Reads `callgrind_annotate --inclusive=no` and `--inclusive=yes`.
"""
import collections
import re
import subprocess
import sys

# (label, regular expression on the (mangled) function name) of the inclusive entry points.
ENTRY_POINTS = [
    ("OperationQueue.addOperation", r"^\$s10Foundation14OperationQueueC03addB0yyAA0B0CF$"),
    ("OperationQueue._schedule() (its scan)", r"^\$s10Foundation14OperationQueueC9_scheduleyyF$"),
    ("Operation.didChangeValue (KVO -> observeValue)", r"^\$s10Foundation9OperationC14didChangeValue6forKeyySS_tF$"),
    ("Foundation's Operation.init", r"^\$s10Foundation9OperationCACycfc$"),
    ("swift_getGenericMetadata", r"^swift_getGenericMetadata$"),
    ("  of which Result<_, any Error>'s accessor", r"^\$ss6ResultOMa$"),
    ("JobController.trackAndQueue(_:completion:) (track inlined)", r"^\$s6JobKit0A10ControllerC13trackAndQueue_10completionyx_yxYbct10Foundation9OperationCRbzlF$"),
    ("ConcurrentOperation.operationDone", r"^\$s6JobKit19ConcurrentOperationC13operationDone5errorys5Error_pSg_tF$"),
    ("routing: TaskNodeWithCompletion.deliverCompletion", r"^\$s6JobKit22TaskNodeWithCompletionC07deliverF0"),
    ("Work.init", r"^\$s6JobKit4WorkCyACyxGxyYbKccfc$"),
    ("Work.operationStart", r"^\$s6JobKit4WorkC14operationStartyyF$"),
    ("Work deinit", r"^\$s6JobKit4WorkCfD$"),
    ("BlockTask.init", r"^\$s6JobKit9BlockTaskCyACyyYbKccfc$"),
    ("BlockTask.operationStart", r"^\$s6JobKit9BlockTaskC14operationStartyyF$"),
    ("BlockTask deinit", r"^\$s6JobKit9BlockTaskCfD$"),
]


def annotate(path, inclusive):
    """{(function, object): instructions} and the program total of one callgrind output."""
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", "--inclusive=" + ("yes" if inclusive else "no"), path],
        capture_output=True, text=True, check=True).stdout
    costs, total = {}, 0
    for line in out.splitlines():
        match = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$", line)
        if not match:
            continue
        value, rest = int(match.group(1).replace(",", "")), match.group(2)
        if rest.startswith("PROGRAM TOTALS"):
            total = value
            continue
        parts = re.match(r"(.*?)(?: \[([^\]]*)\])?$", rest)
        body, obj = parts.group(1), (parts.group(2) or "").split("/")[-1]
        function = body.split(":", 1)[1] if ":" in body else body
        key = (function, obj)
        costs[key] = max(costs.get(key, 0), value) if inclusive else costs.get(key, 0) + value
    return total, costs


def without_parameters(function):
    """A demangled C++ name without its trailing parameter list (and `const`, and `'2`)."""
    text = re.sub(r"( const)?('\d+)?$", "", function)
    if not text.endswith(")"):
        return function
    depth = 0
    for index in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[index], 0)
        if depth == 0:
            return text[:index]
    return function


def category(function, obj):
    # The name alone: a C++ signature names `TargetMetadata` in the parameters of casts and
    # value witnesses too.
    function = without_parameters(function)
    if obj.startswith("libdispatch"):
        return "libdispatch"
    if re.search(r"swift_(retain|release|bridgeObjectRe|unknownObjectRe|weak|unowned)|doDecrementSlow|_Block_(copy|release)", function):
        return "retain/release"
    if not re.search(r"Metadata", function) and re.search(
            r"malloc|_int_free|^free|cfree|calloc|realloc|memalign|tcache|arena|unlink_chunk|swift_slowAlloc|"
            r"swift_slowDealloc|swift_allocObject|swift_deallocObject|swift_deallocClassInstance", function):
        return "malloc/free"
    if re.search(r"Metadata|getCache|GenericCache|WaitQueue|ConcurrentMap|ConcurrentReadableHashMap|swift_getWitnessTable", function) \
            or (function.startswith("$s") and re.search(r"Ma(Tm)?$", function)):
        return "generic metadata lookups"
    if obj.startswith("libFoundation"):
        if "Operation" in function or "ChangeValue" in function or "observeValue" in function:
            return "corelibs Operation/OperationQueue (own code)"
        return "corelibs other (NSLock, NSCondition, ...)"
    if re.search(r"pthread_mutex|pthread_cond|futex|__lll_", function):
        return "pthread mutexes"
    if obj.startswith("libswift_Concurrency"):
        return "Swift concurrency runtime"
    if re.search(r"6JobKit|CJobKit", function):
        return "JobKit's own code"
    if obj.startswith("libswiftCore"):
        return "Swift runtime, other (casts, enum tags)"
    if obj.startswith("libc"):
        return "libc, other (memcmp, memcpy, TLS)"
    return "other (benchmark code, libswiftDispatch, ...)"


def main():
    small, large, delta = sys.argv[1], sys.argv[2], int(sys.argv[3])
    small_total, small_costs = annotate(small, False)
    large_total, large_costs = annotate(large, False)
    per_task = (large_total - small_total) / delta
    print(f"total: {per_task:.0f} instructions per task")
    totals, members = collections.defaultdict(float), collections.defaultdict(list)
    for key in set(small_costs) | set(large_costs):
        cost = (large_costs.get(key, 0) - small_costs.get(key, 0)) / delta
        totals[category(*key)] += cost
        members[category(*key)].append((cost, key[0]))
    print("\nexclusive, by category (instructions per task)")
    for name, cost in sorted(totals.items(), key=lambda item: -item[1]):
        if abs(cost) < 1:
            continue
        print(f"{cost:8.0f} {100 * cost / per_task:5.1f}%  {name}")
        for member_cost, function in sorted(members[name], reverse=True)[:4]:
            if member_cost >= 50:
                print(f"{'':16}{member_cost:7.0f}  {function[:100]}")
    _, small_inclusive = annotate(small, True)
    _, large_inclusive = annotate(large, True)
    print("\ninclusive, entry points (instructions per task)")
    for label, pattern in ENTRY_POINTS:
        cost = sum(large_inclusive[key] - small_inclusive.get(key, 0)
                   for key in large_inclusive if key[1] and re.search(pattern, key[0])) / delta
        if cost >= 1:
            print(f"{cost:8.0f} {100 * cost / per_task:5.1f}%  {label}")


if __name__ == "__main__":
    main()
