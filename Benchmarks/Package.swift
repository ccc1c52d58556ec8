// swift-tools-version: 6.1
// JobKit's benchmarks, a package of their own (as swift-nio's `Benchmarks/`), so that the library's
// package ships no benchmark product and depends on no package:
//
//   swift package benchmark                                          # allocations and wall clock
//   CI=true swift package benchmark thresholds check --path Thresholds/6.3   # as .ci/run does
//   swift run -c release jobkit-bench                                # paired wall-time ratios vs raw
import PackageDescription

/// The package above, named by the identity SwiftPM gives a path dependency: its folder's name
/// (`JobKit` in a clone named so, the worktree's name in a worktree).
let jobKit = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "JobKit")

/// The settings of the library's own targets: Swift 6 mode, complete concurrency checking.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

let package = Package(
  name: "JobKitBenchmarks",
  platforms: [.macOS(.v13)],
  products: [
    .executable(name: "jobkit-bench", targets: ["JobKitBench"])
  ],
  dependencies: [
    .package(path: ".."),
    // package-benchmark, named by its current identity `benchmark`.
    .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: ["MallocInterposer"]),
  ],
  targets: [
    // The measured cases, shared by jobkit-bench and the benchmark targets.
    .target(
      name: "BenchVariants",
      dependencies: [.product(name: "JobKit", package: jobKit)],
      swiftSettings: strictSettings
    ),
    // Paired wall-time ratios against raw OperationQueue; `--child VARIANT N` runs one case alone.
    .executableTarget(
      name: "JobKitBench",
      dependencies: ["BenchVariants"],
      swiftSettings: strictSettings
    ),
    // package-benchmark suites: allocations (thresholds in Thresholds/) and wall clock.
    .executableTarget(
      name: "JobKitBenchmarks",
      dependencies: [
        "BenchVariants",
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "Benchmarks/JobKitBenchmarks",
      swiftSettings: strictSettings,
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
    .executableTarget(
      name: "FindDuplicatesBenchmarks",
      dependencies: [
        .product(name: "FindDuplicatesCore", package: jobKit),
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "Benchmarks/FindDuplicatesBenchmarks",
      swiftSettings: strictSettings,
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
  ],
  swiftLanguageModes: [.v6]
)
