// jobkit-bench: the cost of a JobController against raw OperationQueue, measured in one run.
//
//   swift run -c release jobkit-bench            # N = 10k, 100k, 1M; 7/7/5 repetitions
//   swift run -c release jobkit-bench --quick    # N = 10k, 100k; 3 repetitions
//
// Every measurement runs in a fresh child process (this same executable, `--child VARIANT N`),
// so each peak-memory figure belongs to one variant alone and no run warms up another's heap.
// Variants of one N are interleaved (a, b, a, b, ...) so machine noise hits both alike; printed
// are the medians and their ratio, and the median of the per-round (paired) ratios.
import Foundation
import JobKit

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// MARK: - Variants (run in the child)

/// A variant: does N no-op tasks and returns once all of them finished.
struct Variant: Sendable {
  let name: String
  let baseline: String
  let summary: String
  let run: @Sendable (Int) -> Void
}

/// (a) Raw OperationQueue: N BlockOperations, counted down to a semaphore.
func runRaw(_ n: Int) {
  runBlockOperations(n, on: OperationQueue())
}

/// N BlockOperations on `queue`, counted down to a semaphore.
func runBlockOperations(_ n: Int, on queue: OperationQueue) {
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    queue.addOperation(
      BlockOperation {
        if remaining.decrement() { done.signal() }
      })
  }
  done.wait()
}

/// (b) A JobController tracking the same N tasks with a per-task completion, a group completion
/// and `allTasksFinished`. `makeTask` makes one no-op task (a BlockOperation for (b), a JobKit
/// ConcurrentOperation for (d)); `limit` sets a per-group limit for (f).
final class CountingJob<Task: Operation>: JobController, @unchecked Sendable {
  // @unchecked Sendable: the counters are only touched from main() and the job's callbacks.
  let n: Int
  let limit: Int?
  let makeTask: @Sendable () -> Task
  private(set) var finishedTasks = 0
  private(set) var groupsFinished = 0
  private(set) var allFinishedCalls = 0

  init(n: Int, limit: Int? = nil, makeTask: @escaping @Sendable () -> Task) {
    self.n = n
    self.limit = limit
    self.makeTask = makeTask
    super.init()
  }

  override func main() {
    if let limit { setMaxConcurrentTasks(limit, forGroup: Task.self) }
    setCompletion(forGroup: Task.self) { [unowned self] in groupsFinished += 1 }
    for _ in 0..<n {
      trackAndQueue(makeTask()) { [unowned self] _ in finishedTasks += 1 }
    }
  }

  override func allTasksFinished() {
    allFinishedCalls += 1
  }

  /// Runs the job to its end and checks its callbacks.
  func runToEnd() {
    startJob()
    waitUntilFinished()
    precondition(finishedTasks == n && allFinishedCalls == 1 && groupsFinished >= 1)
  }
}

func runJob(_ n: Int) {
  CountingJob(n: n) { BlockOperation {} }.runToEnd()
}

/// (e) As (b), with a consumer draining the job's event stream: the cost of the events feature.
func runJobWithEvents(_ n: Int) {
  let job = CountingJob(n: n) { BlockOperation {} }
  let events = job.events
  let drained = DispatchSemaphore(value: 0)
  let counter = Countdown(Int.max)
  Task {
    for await _ in events { _ = counter.decrement() }
    drained.signal()
  }
  job.runToEnd()
  drained.wait()
}

/// (f) As (b), with a per-group limit of 4 running tasks: the cost of the limits feature.
func runJobWithLimit(_ n: Int) {
  CountingJob(n: n, limit: 4) { BlockOperation {} }.runToEnd()
}

/// (a') Raw OperationQueue where each BlockOperation counts down in its `completionBlock`: the
/// cost of the only finish hook Foundation offers for a plain `Operation` on Linux, which a job
/// must use for such tasks.
func runRawCompletionBlock(_ n: Int) {
  let queue = OperationQueue()
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    let operation = BlockOperation {}
    operation.completionBlock = {
      if remaining.decrement() { done.signal() }
    }
    queue.addOperation(operation)
  }
  done.wait()
}

/// A no-op JobKit task: finishes in `operationStart()`, optionally counting down.
final class NoOpTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let countdown: Countdown?
  let done: DispatchSemaphore?
  init(countdown: Countdown? = nil, done: DispatchSemaphore? = nil) {
    self.countdown = countdown
    self.done = done
  }
  override func operationStart() {
    operationDone()
    if let countdown, countdown.decrement() { done?.signal() }
  }
}

/// (c) Raw OperationQueue with N JobKit `ConcurrentOperation` tasks counted down to a semaphore.
func runRawConcurrentOperations(_ n: Int) {
  let queue = OperationQueue()
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    queue.addOperation(NoOpTask(countdown: remaining, done: done))
  }
  done.wait()
}

/// (d) A JobController tracking the same N `ConcurrentOperation` tasks, with the same callbacks
/// as (b): JobKit observes their finish directly, without Foundation's completionBlock hop.
func runNativeJob(_ n: Int) {
  CountingJob(n: n) { NoOpTask() }.runToEnd()
}

/// The variants, and the baseline each one's ratio is taken against.
let variants: [Variant] = [
  Variant(name: "raw", baseline: "raw", summary: "(a) OperationQueue + N BlockOperations -> semaphore", run: runRaw),
  Variant(
    name: "raw-cb", baseline: "raw",
    summary: "(a') as (a), counting down in each completionBlock (Foundation's finish hook on Linux)",
    run: runRawCompletionBlock),
  // Against raw-cb: a job observes a plain operation through its completionBlock, so that is the floor.
  Variant(
    name: "job", baseline: "raw-cb",
    summary: "(b) JobController tracking N BlockOperations: per-task + group + all-finished callbacks",
    run: runJob),
  Variant(
    name: "job-ev", baseline: "job",
    summary: "(e) as (b), with a consumer of the job's event stream",
    run: runJobWithEvents),
  Variant(
    name: "job-lim", baseline: "job",
    summary: "(f) as (b), with setMaxConcurrentTasks(4) for the task group",
    run: runJobWithLimit),
  Variant(
    name: "raw-co", baseline: "raw-co",
    summary: "(c) OperationQueue + N JobKit ConcurrentOperations -> semaphore",
    run: runRawConcurrentOperations),
  Variant(
    name: "job-co", baseline: "raw-co",
    summary: "(d) JobController tracking N ConcurrentOperations, callbacks as (b)",
    run: runNativeJob),
]

/// A thread-safe countdown: `decrement()` returns `true` for the call that reaches zero.
final class Countdown: @unchecked Sendable {
  // @unchecked Sendable: `value` is guarded by `lock`.
  private let lock = NSLock()
  private var value: Int
  init(_ value: Int) { self.value = value }
  func decrement() -> Bool {
    lock.lock()
    defer { lock.unlock() }
    value -= 1
    return value == 0
  }
}

/// Peak resident memory of this process in bytes (VmHWM on Linux, ru_maxrss elsewhere).
func peakResidentBytes() -> Int {
  #if os(Linux)
    if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) {
      for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
        return kb * 1024
      }
    }
    return 0
  #else
    var usage = rusage()
    getrusage(RUSAGE_SELF, &usage)
    return Int(usage.ru_maxrss)
  #endif
}

// MARK: - Parent: orchestrate children

struct Sample {
  let seconds: Double
  let peakBytes: Int
}

func runChild(_ variant: String, _ n: Int) -> Sample {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
  process.arguments = ["--child", variant, String(n)]
  let pipe = Pipe()
  process.standardOutput = pipe
  do {
    try process.run()
  } catch {
    fatalError("cannot start child: \(error)")
  }
  let data = pipe.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let fields = String(decoding: data, as: UTF8.self).split(separator: " ")
  guard process.terminationStatus == 0, fields.count == 2,
    let seconds = Double(fields[0]), let peak = Int(fields[1].trimmingCharacters(in: .whitespacesAndNewlines))
  else {
    fatalError("child \(variant) \(n) failed (status \(process.terminationStatus))")
  }
  return Sample(seconds: seconds, peakBytes: peak)
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

func format(_ value: Double, _ digits: Int = 2) -> String {
  String(format: "%.\(digits)f", value)
}

let arguments = CommandLine.arguments
if arguments.count == 4, arguments[1] == "--child" {
  guard let variant = (variants + compositionVariants).first(where: { $0.name == arguments[2] }),
    let n = Int(arguments[3])
  else {
    fatalError("unknown child arguments \(arguments)")
  }
  let start = DispatchTime.now().uptimeNanoseconds
  variant.run(n)
  let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
  print("\(seconds) \(peakResidentBytes())")
  exit(0)
}

let quick = arguments.contains("--quick")
let plan: [(n: Int, repetitions: Int)] =
  quick ? [(10_000, 3), (100_000, 3)] : [(10_000, 7), (100_000, 7), (1_000_000, 5)]

print("jobkit-bench: \(ProcessInfo.processInfo.activeProcessorCount) cores, medians of interleaved child runs")
for variant in variants + compositionVariants {
  print("  \(variant.name): \(variant.summary)")
}
print("")
print("N          variant  us/task   peak MB   ratio of medians (median of paired ratios), memory vs its baseline")
var perTaskAtSmallest: [String: Double] = [:]
for (n, repetitions) in plan {
  // Composition cases up to 100k only: a million dispatches or pipeline steps says nothing more.
  let variants = n <= 100_000 ? variants + compositionVariants : variants
  var samples: [String: [Sample]] = [:]
  for _ in 0..<repetitions {
    for variant in variants {
      samples[variant.name, default: []].append(runChild(variant.name, n))
    }
  }
  for variant in variants {
    let time = median(samples[variant.name]!.map(\.seconds))
    let peak = median(samples[variant.name]!.map { Double($0.peakBytes) })
    let baseTime = median(samples[variant.baseline]!.map(\.seconds))
    let basePeak = median(samples[variant.baseline]!.map { Double($0.peakBytes) })
    let perTask = time / Double(n) * 1e6
    if perTaskAtSmallest[variant.name] == nil { perTaskAtSmallest[variant.name] = perTask }
    // The paired ratio is the median of the per-round ratios: each round runs a variant right
    // after its baseline, so a slow spell of the shared machine hits both sides of one ratio.
    let paired = median(zip(samples[variant.name]!, samples[variant.baseline]!).map { $0.seconds / $1.seconds })
    let ratio =
      variant.baseline == variant.name
      ? ""
      : "\(format(time / baseTime))x (paired \(format(paired))x), \(format(peak / basePeak))x vs \(variant.baseline)"
    let label = String(n).padding(toLength: 10, withPad: " ", startingAt: 0)
    let name = variant.name.padding(toLength: 8, withPad: " ", startingAt: 0)
    let perTaskText = format(perTask).padding(toLength: 9, withPad: " ", startingAt: 0)
    let peakText = format(peak / 1e6, 1).padding(toLength: 9, withPad: " ", startingAt: 0)
    print("\(label) \(name) \(perTaskText) \(peakText) \(ratio)")
  }
  if n != plan[0].n {
    let growth = variants.map { variant -> String in
      let now = median(samples[variant.name]!.map(\.seconds)) / Double(n) * 1e6
      return "\(variant.name) \(format(now / perTaskAtSmallest[variant.name]!))x"
    }
    print("           per-task cost vs N=\(plan[0].n): \(growth.joined(separator: ", "))")
  }
}
