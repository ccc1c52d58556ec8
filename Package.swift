// swift-tools-version: 6.0
import PackageDescription

/// Strict settings shared by every target: Swift 6 language mode (set package-wide below),
/// complete concurrency checking, and `any` spelled out for existentials.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

let package = Package(
  name: "JobKit",
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .macCatalyst(.v16)],
  products: [
    .library(name: "JobKit", targets: ["JobKit"]),
    .library(name: "JobKitTesting", targets: ["JobKitTesting"]),
    .executable(name: "find-duplicates", targets: ["FindDuplicates"]),
    // The sample's engine, a product only so that the Benchmarks package (its own package, which
    // sees products only) can measure its hashing stages. Sample code: not covered by the API check.
    .library(name: "FindDuplicatesCore", targets: ["FindDuplicatesCore"]),
    .executable(name: "command-script", targets: ["CommandScript"]),
    .executable(name: "pipeline", targets: ["PipelineSample"]),
    .executable(name: "event-commands", targets: ["EventCommands"]),
  ],
  targets: [
    // An atomic word for the completion-block hook (`Synchronization.Atomic` needs macOS 15),
    // `dispatch_async_f` for the tasks a job starts itself, and a thread-local word that marks the
    // operation whose finish the thread posts.
    .target(name: "CJobKitAtomics"),
    .target(name: "JobKit", dependencies: ["CJobKitAtomics"], swiftSettings: strictSettings),
    .target(name: "JobKitTesting", dependencies: ["JobKit"], swiftSettings: strictSettings),
    .executableTarget(
      name: "FindDuplicates",
      dependencies: ["JobKit", "FindDuplicatesCore"],
      path: "Samples/FindDuplicates",
      exclude: ["Core"],
      swiftSettings: strictSettings
    ),
    .target(
      name: "FindDuplicatesCore",
      dependencies: ["JobKit"],
      path: "Samples/FindDuplicates/Core",
      swiftSettings: strictSettings
    ),
    .executableTarget(
      name: "CommandScript",
      dependencies: ["JobKit"],
      path: "Samples/CommandScript",
      swiftSettings: strictSettings
    ),
    .executableTarget(
      name: "PipelineSample",
      dependencies: ["JobKit"],
      path: "Samples/Pipeline",
      swiftSettings: strictSettings
    ),
    .executableTarget(
      name: "EventCommands",
      dependencies: ["JobKit"],
      path: "Samples/EventCommands",
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "JobKitTests", dependencies: ["JobKit", "JobKitTesting"], exclude: ["Model/README.md"],
      swiftSettings: strictSettings),
    .testTarget(name: "FindDuplicatesTests", dependencies: ["FindDuplicatesCore"], swiftSettings: strictSettings),
  ],
  swiftLanguageModes: [.v6]
)
