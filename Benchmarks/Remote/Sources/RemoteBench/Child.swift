import Foundation

/// A child process of this benchmark: `remote-bench` itself in another mode (a worker), with
/// standard input on a pipe and standard output and error inherited.
final class Child: Sendable {
  private let process: Process
  private let input: Pipe
  private let exitStatus: AsyncStream<Int32>
  /// The child's process id.
  let pid: Int32

  /// Starts `remote-bench ARGUMENTS...`; the environment (JOBKIT_POSTGRES_URL) is inherited.
  init(_ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Child.executable)
    process.arguments = arguments
    let input = Pipe()
    process.standardInput = input
    let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
    process.terminationHandler = { finished in
      continuation.yield(finished.terminationStatus)
      continuation.finish()
    }
    try process.run()
    self.process = process
    self.input = input
    self.exitStatus = stream
    self.pid = process.processIdentifier
  }

  /// This program's own executable.
  private static let executable: String = {
    guard let resolved = realpath("/proc/self/exe", nil) else { return CommandLine.arguments[0] }
    defer { free(resolved) }
    return String(cString: resolved)
  }()

  /// Writes a line to the child's standard input.
  func send(_ line: String) {
    input.fileHandleForWriting.write(Data((line + "\n").utf8))
  }

  /// Sends SIGTERM (a graceful shutdown) and returns the child's exit status.
  func stop() async -> Int32 {
    process.terminate()
    for await status in exitStatus {
      return status
    }
    return process.terminationStatus
  }

  /// Waits for the child to exit by itself and returns its exit status.
  func exited() async -> Int32 {
    for await status in exitStatus {
      return status
    }
    return process.terminationStatus
  }
}
