// swift-tools-version: 6.0
import PackageDescription

/// The same strict settings as JobKit's own targets.
let strictSettings: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableExperimentalFeature("StrictConcurrency=complete"),
]

/// Remote tasks: a JobKit job whose tasks run on worker processes through PostgreSQL
/// (postgres-nio), workers as service-lifecycle services. JobKit itself depends on no package.
let package = Package(
  name: "JobKitPostgres",
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .macCatalyst(.v16)],
  products: [
    .library(name: "JobKitPostgres", targets: ["JobKitPostgres"]),
    .executable(name: "tree-hash", targets: ["TreeHash"]),
  ],
  dependencies: [
    .package(name: "JobKit", path: "../.."),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
  ],
  targets: [
    .target(
      name: "JobKitPostgres",
      dependencies: [
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
      ],
      swiftSettings: strictSettings
    ),
    // The sample: the Merkle hash of a directory tree, in process or with its leaves on workers.
    .executableTarget(
      name: "TreeHash",
      dependencies: [
        "JobKitPostgres",
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
    // The task kinds and handlers the tests and their worker processes share.
    .target(
      name: "RemoteTestSupport",
      dependencies: [
        "JobKitPostgres",
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
    // The worker (and job) processes the multi-process tests spawn, kill, stop and resume.
    .executableTarget(
      name: "jobkit-remote-test-worker",
      dependencies: [
        "JobKitPostgres",
        "RemoteTestSupport",
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Sources/RemoteTestWorker",
      swiftSettings: strictSettings
    ),
    .testTarget(
      name: "JobKitPostgresTests",
      dependencies: [
        "JobKitPostgres",
        "RemoteTestSupport",
        "jobkit-remote-test-worker",
        "TreeHash",
        .product(name: "JobKit", package: "JobKit"),
        .product(name: "JobKitTesting", package: "JobKit"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strictSettings
    ),
  ],
  swiftLanguageModes: [.v6]
)
