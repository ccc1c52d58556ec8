import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A `jobkit-remote-test-worker` process the test starts, signals and waits for.
final class ChildProcess: @unchecked Sendable {
  // @unchecked Sendable: `output` is behind its lock; `process` is only started and signalled.
  let process = Process()
  private let lock = NSLock()
  private var output = ""
  private var errors = ""

  /// The test worker's executable, beside the test bundle in the build's products directory.
  static var executable: URL {
    if let path = ProcessInfo.processInfo.environment["JOBKIT_REMOTE_TEST_WORKER"] {
      return URL(fileURLWithPath: path)
    }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = directory.appendingPathComponent("jobkit-remote-test-worker")
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
      directory.deleteLastPathComponent()
    }
    return Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("jobkit-remote-test-worker")
  }

  init(_ arguments: [String]) throws {
    process.executableURL = Self.executable
    process.arguments = arguments
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    stdout.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let text = String(decoding: handle.availableData, as: UTF8.self)
      self?.append(text, error: false)
    }
    stderr.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let text = String(decoding: handle.availableData, as: UTF8.self)
      self?.append(text, error: true)
    }
    try process.run()
  }

  private func append(_ text: String, error: Bool) {
    lock.lock()
    defer { lock.unlock() }
    if error { errors += text } else { output += text }
  }

  var standardOutput: String {
    lock.lock()
    defer { lock.unlock() }
    return output
  }

  var standardError: String {
    lock.lock()
    defer { lock.unlock() }
    return errors
  }

  func signal(_ number: Int32) {
    kill(process.processIdentifier, number)
  }

  /// Waits until the standard output has a line starting with `prefix`; returns that line.
  @discardableResult
  func waitForLine(_ prefix: String, timeout: Duration = .seconds(60)) async throws -> String {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
      if let line = standardOutput.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
        return String(line)
      }
      if !process.isRunning, !standardOutput.contains(prefix) {
        try await Task.sleep(for: .milliseconds(100))
        if let line = standardOutput.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
          return String(line)
        }
        Issue.record("the process exited (\(process.terminationStatus)) before '\(prefix)': \(standardError)")
        throw CancellationError()
      }
      try await Task.sleep(for: .milliseconds(50))
    }
    Issue.record("no line '\(prefix)' within \(timeout): \(standardOutput) \(standardError)")
    throw CancellationError()
  }

  /// Waits for the process to exit and returns its status.
  func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while process.isRunning {
      guard clock.now < deadline else {
        Issue.record("the process did not exit within \(timeout)")
        signal(SIGKILL)
        throw CancellationError()
      }
      try await Task.sleep(for: .milliseconds(50))
    }
    // The pipes' last bytes.
    try await Task.sleep(for: .milliseconds(100))
    return process.terminationStatus
  }

  /// Kills the process if it still runs (a test's cleanup).
  func stop() {
    if process.isRunning {
      signal(SIGCONT)
      signal(SIGKILL)
    }
  }
}

/// Worker processes on a queue, stopped when the test ends.
struct WorkerProcesses {
  var processes: [ChildProcess] = []

  static func start(
    _ count: Int, queue: String, prefix: String = "w", extra: [String] = []
  ) async throws -> WorkerProcesses {
    var workers = WorkerProcesses()
    for index in 0..<count {
      workers.processes.append(
        try ChildProcess(
          ["worker", "--database", TestDatabase.url ?? "", "--queue", queue, "--id", "\(prefix)\(index)"] + extra))
    }
    for process in workers.processes {
      try await process.waitForLine("ready")
    }
    return workers
  }

  func stopAll() {
    for process in processes { process.stop() }
  }
}
