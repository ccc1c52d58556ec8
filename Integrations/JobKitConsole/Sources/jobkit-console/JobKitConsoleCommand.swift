import Foundation
import Hummingbird
import JobKitConsole
import JobKitPostgres
import Logging
import PostgresNIO
import ServiceLifecycle

/// `jobkit-console --database URL [--listen HOST:PORT] [--token TOKEN] [--allow-host NAME]`: the console's routes at
/// the root of a server of their own. The PostgreSQL client and the server run in one
/// `ServiceGroup`; SIGTERM or SIGINT shuts both down gracefully (the server first).
@main
struct JobKitConsoleCommand {
  static func main() async {
    var logger = Logger(label: "jobkit-console")
    logger.logLevel = .info
    let options: ConsoleOptions
    let database: PostgresClient.Configuration
    do {
      options = try ConsoleOptions.parse(
        Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
      database = try PostgresClient.Configuration(url: options.database)
    } catch {
      // Neither error type repeats the URL's password.
      FileHandle.standardError.write(Data("\(error)\n".utf8))
      exit(2)
    }
    var clientLogger = logger
    clientLogger.logLevel = .warning
    let client = PostgresClient(configuration: database, backgroundLogger: clientLogger)
    var configuration = RemoteConsole.Configuration(token: options.token)
    configuration.allowedHosts = HostAllowlist.loopback + options.allowedHosts
    let console = RemoteConsole(client: client, configuration: configuration, logger: logger)
    let router = Router()
    console.addRoutes(to: router)
    let readOnly = options.token == nil || options.token?.isEmpty == true
    let serverLogger = logger
    let app = Application(
      router: router,
      configuration: .init(address: .hostname(options.host, port: options.port), serverName: "jobkit-console"),
      onServerRunning: { channel in
        serverLogger.info(
          "listening",
          metadata: [
            "address": "\(channel.localAddress.map { "\($0)" } ?? "?")", "read-only": "\(readOnly)",
          ])
      },
      logger: logger
    )
    let group = ServiceGroup(
      configuration: .init(
        services: [client, app], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    do {
      try await group.run()
    } catch {
      logger.error("stopped", metadata: ["error": "\(error)"])
      exit(1)
    }
  }
}
