// jobkit-bench: the cost of a JobController against raw OperationQueue, measured in one run.
//
//   cd Benchmarks
//   swift run -c release jobkit-bench            # N = 10k, 100k, 1M; 7/7/5 repetitions
//   swift run -c release jobkit-bench --quick    # N = 10k, 100k; 3 repetitions
//   .build/release/jobkit-bench --child job 20000  # one variant alone (under callgrind, say)
//
// Every measurement runs in a fresh child process (this same executable, `--child VARIANT N`),
// so each peak-memory figure belongs to one variant alone and no run warms up another's heap.
// Variants of one N are interleaved (a, b, a, b, ...) so machine noise hits both alike; printed
// are the medians and their ratio, and the median of the per-round (paired) ratios.
import BenchVariants
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
  guard let variant = Variant.named(arguments[2]),
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
for variant in variants + compositionVariants + taskGroupVariants {
  print("  \(variant.name): \(variant.summary)")
}
print("")
print("N          variant  us/task   peak MB   ratio of medians (median of paired ratios), memory vs its baseline")
var perTaskAtSmallest: [String: Double] = [:]
for (n, repetitions) in plan {
  // Composition cases up to 100k only: a million dispatches or pipeline steps says nothing more.
  let variants = n <= 100_000 ? variants + compositionVariants + taskGroupVariants : variants + taskGroupVariants
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
