// find-duplicates: finds files with identical content, as a JobKit workflow. The logic lives in
// the FindDuplicatesCore library (Core/); this file is the command line around it.
//
//     swift run -c release find-duplicates [OPTIONS] [DIR...]     (--help for the options)
//
// Exit status: 0 when the search completed (whether or not it found duplicates), 1 if the job
// failed or standard output could not be written, 2 for a bad command line or DIR, 130 when
// interrupted with Ctrl-C (143 with SIGTERM).

import FindDuplicatesCore
import Foundation
import JobKit

/// Standard output: every write checked, records never cut by a signal (see `ReportOutput`).
let standardOutput = ReportOutput(descriptor: STDOUT_FILENO)

func writeToStandardError(_ text: String) {
  _ = ReportOutput.writeAll(Array(text.utf8), to: STDERR_FILENO)
}

/// Ends the process after standard output could not be written: quietly for a reader that went
/// away (as SIGPIPE ends it when it is not ignored), else with one message and status 1.
func exitAfterFailedOutput(_ outcome: ReportOutput.Outcome) -> Never {
  if case .failed(let code) = outcome {
    writeToStandardError("find-duplicates: cannot write to standard output: \(String(cString: strerror(code)))\n")
    exit(1)
  }
  signal(SIGPIPE, SIG_DFL)
  raise(SIGPIPE)
  _exit(128 + SIGPIPE)
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
    let outcome = ReportOutput.writeAll(Array((Options.usage + "\n").utf8), to: STDOUT_FILENO)
    if outcome != .written { exitAfterFailedOutput(outcome) }
    exit(0)
  case .run(let parsed):
    options = parsed
  }
} catch {
  exitWithUsageError(error.description)
}

for root in options.roots {
  if let problem = Options.problem(withRoot: root) {
    exitWithUsageError(problem.description)
  }
}

// Ctrl-C (and SIGTERM): SIGINT and SIGTERM are blocked here, before any other thread exists, so
// every thread the process creates inherits the block, and the main thread takes the signal with
// `sigwait` below. The
// signal wakes only the thread that handles it: with a handler and a self-pipe it would wake one
// thread to run the handler and another to read the pipe, each of which may wait for a core that
// the reading tasks (and, on a shared machine, other programs) are using. So the job does not run
// on the main thread (no top-level `await`, whose `dispatch_main` would unblock every signal in
// the main thread): it runs in a detached task, which exits when it is done.
var interruptSignals = sigset_t()
sigemptyset(&interruptSignals)
sigaddset(&interruptSignals, SIGINT)
sigaddset(&interruptSignals, SIGTERM)
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
    switch standardOutput.write(ReportWriter.records(report, format: options.format)) {
    case .written:
      writeToStandardError(ReportWriter.standardError(report, format: options.format))
      exit(0)
    case .interrupted:
      // A signal stopped the output at a record boundary; the main thread, which took it, exits.
      return
    case let failure:
      exitAfterFailedOutput(failure)
    }
  } catch is CancellationError {
    // Only a signal cancels the job, and the main thread, which took it, reports it and exits.
  } catch {
    progressLine.stop()
    await writeTimeline()
    writeToStandardError("find-duplicates: \(error)\n")
    exit(1)
  }
}

// A signal cancels the job: its tasks stop at their next file or read (at most 256 KiB), no next
// step is set up, and the process exits with 128 + the signal (130 for Ctrl-C) once they all
// finished, or after 50 ms: on a machine short of memory one read can take that long, and
// nothing is left to clean up (the files are only read). If the report is being written, the
// output stops at a record boundary: at once between records, else once the record being
// written is complete (a second signal exits at once, e.g. when no one reads the pipe).
var signalNumber: Int32 = 0
while sigwait(&interruptSignals, &signalNumber) != 0 {}
job.cancel()
progressLine.stop()
if !standardOutput.interrupt() {
  var noWait = timespec(tv_sec: 0, tv_nsec: 0)
  while !standardOutput.waitForRecordEnd(timeout: .milliseconds(100)) {
    if sigtimedwait(&interruptSignals, nil, &noWait) > 0 { break }
  }
}
let finished = DispatchSemaphore(value: 0)
Thread {
  job.waitUntilFinished()
  finished.signal()
}.start()
_ = finished.wait(timeout: .now() + .milliseconds(50))
writeToStandardError(signalNumber == SIGTERM ? "find-duplicates: terminated\n" : "find-duplicates: interrupted\n")
_exit(128 + signalNumber)
