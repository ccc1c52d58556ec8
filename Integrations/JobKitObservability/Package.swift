// swift-tools-version: 6.0
import PackageDescription

/// The same strict settings as JobKit's own targets.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

/// Bridges from JobKit's events to the Swift server observability packages: swift-log,
/// swift-metrics and swift-distributed-tracing. JobKit itself depends on none of them.
let package = Package(
  name: "JobKitObservability",
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .macCatalyst(.v16)],
  products: [
    .library(name: "JobKitObservability", targets: ["JobKitObservability"])
  ],
  dependencies: [
    .package(name: "JobKit", path: "../.."),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
  ],
  targets: [
    .target(
      name: "JobKitObservability",
      dependencies: [
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Tracing", package: "swift-distributed-tracing"),
      ],
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "JobKitObservabilityTests",
      dependencies: [
        "JobKitObservability",
        .product(name: "JobKitTesting", package: "JobKit"),
        .product(name: "InMemoryLogging", package: "swift-log"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
      ],
      swiftSettings: strictSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
