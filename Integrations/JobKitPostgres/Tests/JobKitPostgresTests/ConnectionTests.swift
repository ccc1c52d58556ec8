import Foundation
import JobKit
import JobKitPostgres
import Logging
import PostgresNIO
import RemoteTestSupport
import Testing

/// URLs (no server needed).
@Suite struct PostgresURLTests {
  @Test func aSocketDirectoryInTheHostParameterConnectsToTheUnixSocket() throws {
    let configuration = try PostgresClient.Configuration(url: "postgres://postgres@localhost:5433/db?host=/tmp/pg")
    #expect(configuration.unixSocketPath == "/tmp/pg/.s.PGSQL.5433")
    #expect(configuration.username == "postgres")
    #expect(configuration.database == "db")
    #expect(configuration.host == nil)
  }

  @Test func userPasswordAndDatabaseArePercentDecoded() throws {
    let configuration = try PostgresClient.Configuration(url: "postgresql://us%40er:p%3Ass%2Fw@db.example:6543/my%20db")
    #expect(configuration.host == "db.example")
    #expect(configuration.port == 6543)
    #expect(configuration.username == "us@er")
    #expect(configuration.password == "p:ss/w")
    #expect(configuration.database == "my db")
  }

  @Test func errorsNeverRepeatThePassword() {
    for url in [
      "postgres://user:s3cr3t-pw@db.example/db?sslmode=bogus",
      "mysql://user:s3cr3t-pw@db.example/db",
      "postgres://user:s3cr3t-pw@db.example/db?sslmode=require&host=/tmp",
      "postgres://user:s3cr3t-pw@db.example/db?port=99999",
      "postgres://user:s3cr3t-pw@db.example/db?application_name=x",
      "postgres://:s3cr3t-pw@db.example/db",
    ] {
      #expect {
        _ = try PostgresClient.Configuration(url: url)
      } throws: { error in
        let text = "\(error) \(String(reflecting: error))"
        return error is PostgresURLError && !text.contains("s3cr3t-pw")
      }
    }
  }
}

extension DatabaseTests {
  /// TLS, migrations: against the real server.
  @Suite
  struct ConnectionTests {
    static let tlsURL = TestDatabase.environment["JOBKIT_POSTGRES_TLS_URL"]
    static let tlsRoot = TestDatabase.environment["JOBKIT_POSTGRES_TLS_ROOT"]

    static func usesTLS(_ client: PostgresClient) async throws -> Bool {
      var ssl = false
      for try await (value) in try await client.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .decode(Bool.self)
      {
        ssl = value
      }
      return ssl
    }

    @Test func sslmodeRequireEncryptsAndRunsRemoteTasks() async throws {
      let url = try #require(Self.tlsURL, "JOBKIT_POSTGRES_TLS_URL is not set (scripts/with-postgres sets it)")
      try await TestDatabase.withClient(url: url) { client in
        let checked1 = try await Self.usesTLS(client)
        #expect(checked1)
        let queue = try await TestDatabase.makeQueue(client)
        try await TestDatabase.withWorker(queue) { _ in
          let output = try await RemoteWork<EchoKind>(EchoKind.Input(text: "tls"), queue: queue, idempotencyKey: "tls")
            .run()
          #expect(output.text == "tls")
        }
      }
    }

    @Test func sslmodeVerifyFullChecksTheCertificate() async throws {
      let url = try #require(Self.tlsURL)
      let root = try #require(Self.tlsRoot)
      let verified = url.replacingOccurrences(of: "sslmode=require", with: "sslmode=verify-full&sslrootcert=\(root)")
        .replacingOccurrences(of: "@127.0.0.1:", with: "@localhost:")
      try await TestDatabase.withClient(url: verified) { client in
        let checked2 = try await Self.usesTLS(client)
        #expect(checked2)
      }
      // Without the self-signed root, the chain does not verify: the connection is refused.
      let unverified = try PostgresClient.Configuration(
        url: url.replacingOccurrences(of: "sslmode=require", with: "sslmode=verify-full"))
      guard case .some(let host) = unverified.host, let port = unverified.port else {
        Issue.record("not a TCP URL: \(url)")
        return
      }
      let logger = Logger(label: "test")
      await #expect(throws: (any Error).self) {
        let connection = try await PostgresConnection.connect(
          configuration: PostgresConnection.Configuration(
            host: host, port: port, username: unverified.username, password: nil, database: unverified.database,
            tls: .require(try NIOSSLContext(configuration: Self.verifyingTLS()))),
          id: 1, logger: logger)
        try await connection.close()
      }
    }

    /// Full verification against the system's roots, which do not include the test certificate.
    static func verifyingTLS() -> TLSConfiguration {
      var configuration = TLSConfiguration.makeClientConfiguration()
      configuration.certificateVerification = .fullVerification
      return configuration
    }

    @Test func concurrentMigrationsOfAFreshDatabaseApplyEachVersionOnce() async throws {
      let database = "jobkit_migrate_\(UUID().uuidString.prefix(8).lowercased())"
      try await TestDatabase.withClient { client in
        // An identifier cannot be a bind parameter; this one is made of hex digits only.
        try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"))
      }
      let url = try #require(TestDatabase.url).replacingOccurrences(of: "/postgres?", with: "/\(database)?")
      try await TestDatabase.withClient(url: url) { client in
        try await withThrowingTaskGroup(of: Void.self) { group in
          for index in 0..<4 {
            group.addTask {
              try await RemoteQueue(
                client: client, name: "m\(index)", configuration: .init(), logger: TestDatabase.logger
              ).migrate()
            }
          }
          try await group.waitForAll()
        }
        try await RemoteQueue(client: client, name: "again", configuration: .init(), logger: TestDatabase.logger)
          .migrate()
        var versions: [Int32] = []
        for try await (version) in try await client.query("SELECT version FROM jobkit_remote_schema ORDER BY version")
          .decode(Int32.self)
        {
          versions.append(version)
        }
        #expect(versions == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
      }
      try await TestDatabase.withClient { client in
        try await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE \(database) WITH (FORCE)"))
      }
    }
  }
}
