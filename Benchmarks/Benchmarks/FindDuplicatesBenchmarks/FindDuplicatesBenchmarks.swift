// find-duplicates' hashing stages under package-benchmark, through FindDuplicatesCore's public
// API: a search of a tree whose files all need their first blocks hashed (sizes shared by three
// files of more than 16 KiB), half of them also a full hash and a byte comparison; and XXHash64
// over 1 MiB. `mallocCountTotal` is checked in CI against Thresholds/; wall clock on local runs.
import Benchmark
import FindDuplicatesCore
import Foundation

/// Allocation counts are the contract; wall clock is measured on local runs only (`CI` unset).
let metrics: [BenchmarkMetric] =
  ProcessInfo.processInfo.environment["CI"] == nil ? [.mallocCountTotal, .wallClock] : [.mallocCountTotal]

/// Size groups in the tree, three files each.
let sizeGroups = 20

/// A tree of `sizeGroups` x 3 files: group `g` has three files of 20 KiB + `g` bytes; in even
/// groups the three are identical (first blocks agree, so they are hashed fully and compared), in
/// odd ones their first bytes differ (the first-block hashes tell them apart).
func makeTree() throws -> URL {
  let root = FileManager.default.temporaryDirectory
    .appendingPathComponent("jobkit-fd-bench-\(ProcessInfo.processInfo.processIdentifier)")
  try? FileManager.default.removeItem(at: root)
  for group in 0..<sizeGroups {
    let directory = root.appendingPathComponent("group\(group)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    for copy in 0..<3 {
      var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: group), count: 20 * 1024 + group)
      if group % 2 == 1 { bytes[0] = UInt8(copy) }
      try Data(bytes).write(to: directory.appendingPathComponent("file\(copy)"))
    }
  }
  return root
}

let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: metrics,
    units: [.mallocCountTotal: .count],  // exact counts, not thousands
    warmupIterations: 2,
    maxDuration: .seconds(2),
    maxIterations: 25,
    // Thread and cache noise moves a few allocations between runs: allow 2% either way.
    thresholds: [.mallocCountTotal: .init(relative: [.p90: 2.0])]
  )

  Benchmark("search-\(sizeGroups * 3)-files") { benchmark, root in
    for _ in benchmark.scaledIterations {
      let job = FindDuplicatesJob(configuration: .init(roots: [Array(root.path.utf8)], minimumSize: 1))
      job.startJob()
      job.waitUntilFinished()
      precondition(job.report?.sets.count == sizeGroups / 2)
    }
  } setup: {
    try makeTree()
  } teardown: {
    // The tree is removed by the next run's makeTree() or the system's temporary-file cleanup.
  }

  let buffer = [UInt8](repeating: 7, count: 1 << 20)
  // Hashing allocates nothing: any allocation is a regression (a relative threshold of 0 is moot).
  Benchmark(
    "XXHash64-1MiB",
    configuration: .init(metrics: metrics, thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])])
  ) { benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(buffer.withUnsafeBytes { XXHash64.hash($0) })
    }
  }
}
