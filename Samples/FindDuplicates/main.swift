// find-duplicates: finds files with identical content, as a JobKit workflow. The logic lives in
// the FindDuplicatesCore library (Core/); this file is the command line around it.
//
//     swift run -c release find-duplicates [OPTIONS] [DIR...]     (--help for the options)
//
// Exit status: 0 when the search completed (whether or not it found duplicates), 1 if the job
// failed, 2 for a bad command line or DIR, 130 when interrupted with Ctrl-C.

import FindDuplicatesCore
import Foundation
import JobKit

/// Writes `bytes` to `descriptor`, all of them.
func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
  bytes.withUnsafeBytes { buffer in
    var offset = 0
    while offset < buffer.count {
      let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
      if written < 0 {
        if errno == EINTR { continue }
        return
      }
      offset += written
    }
  }
}

func writeToStandardError(_ text: String) {
  writeAll(Array(text.utf8), to: STDERR_FILENO)
}

/// Prints `message` and the way to get help on standard error, and exits with status 2.
func exitWithUsageError(_ message: String) -> Never {
  writeToStandardError("find-duplicates: \(message)\nRun 'find-duplicates --help' for usage.\n")
  exit(2)
}

// The arguments as raw bytes: a directory name need not be UTF-8.
let arguments = (1..<Int(CommandLine.argc)).map { index in
  Array(UnsafeRawBufferPointer(start: CommandLine.unsafeArgv[index]!, count: strlen(CommandLine.unsafeArgv[index]!)))
}

let options: Options
do {
  switch try Options.parse(arguments) {
  case .help:
    print(Options.usage)
    exit(0)
  case .run(let parsed):
    options = parsed
  }
} catch {
  exitWithUsageError(error.description)
}

for root in options.roots {
  var status = stat()
  let found = (root + [0]).withUnsafeBufferPointer { path in
    path.withMemoryRebound(to: CChar.self) { stat($0.baseAddress!, &status) } == 0
  }
  let name = PathEscaping.escapedForTerminal(root)
  guard found else {
    exitWithUsageError("\(name): \(String(cString: strerror(errno)))")
  }
  let type = status.st_mode & S_IFMT
  guard type == S_IFDIR || type == S_IFREG else {
    exitWithUsageError("\(name): not a directory or regular file")
  }
}

// Ctrl-C: SIGINT is blocked here, before any other thread exists, so every thread the process
// creates inherits the block, and the main thread takes the signal with `sigwait` below. The
// signal wakes only the thread that handles it: with a handler and a self-pipe it would wake one
// thread to run the handler and another to read the pipe, each of which may wait for a core that
// the reading tasks (and, on a shared machine, other programs) are using. So the job does not run
// on the main thread (no top-level `await`, whose `dispatch_main` would unblock every signal in
// the main thread): it runs in a detached task, which exits when it is done.
var interruptSignals = sigset_t()
sigemptyset(&interruptSignals)
sigaddset(&interruptSignals, SIGINT)
pthread_sigmask(SIG_BLOCK, &interruptSignals, nil)

let status = ProgressStatus()
let job = FindDuplicatesJob(configuration: .init(options), status: status)
let progressLine = ProgressLine(status: status)
if !options.quiet {
  progressLine.start()
}
// --timeline: the job's events are recorded only when asked for.
let timeline = options.timelinePath.map { _ in JobTimeline() }
timeline?.record(job)

/// Writes the recorded timeline to the `--timeline` file, if one was asked for.
func writeTimeline() async {
  guard let timeline, let path = options.timelinePath else { return }
  await timeline.waitUntilRecorded()
  let directories = options.roots.map { PathEscaping.escapedForTerminal($0) }.joined(separator: " ")
  let contents =
    path.hasSuffix(".json")
    ? timeline.traceEventJSON() : Data(timeline.html(title: "find-duplicates \(directories)").utf8)
  if !FileManager.default.createFile(atPath: path, contents: contents) {
    writeToStandardError("find-duplicates: cannot write the timeline to \(path)\n")
  }
}

Task.detached { [options] in
  do {
    try await job.run()
    progressLine.stop()
    await writeTimeline()
    guard let report = job.report else { exit(1) }
    writeAll(ReportWriter.standardOutput(report, format: options.format), to: STDOUT_FILENO)
    writeToStandardError(ReportWriter.standardError(report, format: options.format))
    exit(0)
  } catch is CancellationError {
    // Only Ctrl-C cancels the job, and the main thread, which took it, reports it and exits.
  } catch {
    progressLine.stop()
    await writeTimeline()
    writeToStandardError("find-duplicates: \(error)\n")
    exit(1)
  }
}

// Ctrl-C cancels the job: its tasks stop at their next file or read (at most 256 KiB), no next
// step is set up, and the process exits with 130 once they all finished, or after 50 ms: on a
// machine short of memory one read can take that long, and nothing is left to clean up (the
// files are only read, and output is written with write(2), unbuffered).
var signalNumber: Int32 = 0
while sigwait(&interruptSignals, &signalNumber) != 0 || signalNumber != SIGINT {}
job.cancel()
progressLine.stop()
let finished = DispatchSemaphore(value: 0)
Thread {
  job.waitUntilFinished()
  finished.signal()
}.start()
_ = finished.wait(timeout: .now() + .milliseconds(50))
writeToStandardError("find-duplicates: interrupted\n")
_exit(130)
