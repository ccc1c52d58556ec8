// swift-tools-version: 6.0
import PackageDescription

/// The same strict settings as JobKit's own targets.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

/// The operators' console of remote tasks: Hummingbird 2 routes a service mounts under a prefix of
/// its choice, and the same routes in the standalone `jobkit-console`. JobKitPostgres by path.
let package = Package(
  name: "JobKitConsole",
  platforms: [.macOS(.v14)],
  products: [
    .library(name: "JobKitConsole", targets: ["JobKitConsole"]),
    .executable(name: "jobkit-console", targets: ["jobkit-console"]),
  ],
  dependencies: [
    .package(name: "JobKit", path: "../.."),
    .package(name: "JobKitPostgres", path: "../JobKitPostgres"),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    .target(
      name: "JobKitConsole",
      dependencies: [
        .product(name: "JobKitPostgres", package: "JobKitPostgres"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
    .executableTarget(
      name: "jobkit-console",
      dependencies: [
        "JobKitConsole",
        .product(name: "JobKitPostgres", package: "JobKitPostgres"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
    // Seeds a database through JobKitPostgres's API for scripts/check-in-chromium.sh.
    .executableTarget(
      name: "jobkit-console-seed",
      dependencies: [
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "JobKitPostgres", package: "JobKitPostgres"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Sources/ConsoleSeed",
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "JobKitConsoleTests",
      dependencies: [
        "JobKitConsole",
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "JobKitPostgres", package: "JobKitPostgres"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HummingbirdTesting", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
