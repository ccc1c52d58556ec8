// swift-tools-version: 6.0
import PackageDescription

/// The same strict settings as JobKit's own targets.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

/// `remote-bench`: throughput, latency and round trips of JobKitPostgres's remote tasks against
/// a hand-written postgres-nio loop, on a real PostgreSQL (`run.sh` starts a throwaway one). A
/// package of its own, so that neither JobKit nor JobKitPostgres depends on it.
let package = Package(
  name: "RemoteBench",
  platforms: [.macOS(.v13)],
  products: [
    .executable(name: "remote-bench", targets: ["RemoteBench"])
  ],
  dependencies: [
    .package(name: "JobKit", path: "../.."),
    .package(name: "JobKitPostgres", path: "../../Integrations/JobKitPostgres"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    .executableTarget(
      name: "RemoteBench",
      dependencies: [
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "JobKitPostgres", package: "JobKitPostgres"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    )
  ],
  swiftLanguageModes: [.v6]
)
