// find-duplicates: finds files with identical content, as a JobKit workflow.
//
//     swift run find-duplicates [--min-size BYTES] [DIR]
//
// Exit status: 0 when the search completed (whether or not it found duplicates), 1 if the job
// failed, 2 for a bad command line or DIR, 130 when interrupted with Ctrl-C.

import Foundation
import JobKit

/// Prints `message` and the way to get help on standard error, and exits with status 2.
func exitWithUsageError(_ message: String) -> Never {
  writeToStandardError("find-duplicates: \(message)\nRun 'find-duplicates --help' for usage.\n")
  exit(2)
}

let options: Options
do {
  switch try Options.parse(CommandLine.arguments.dropFirst()) {
  case .help:
    print(Options.usage)
    exit(0)
  case .run(let parsed):
    options = parsed
  }
} catch {
  exitWithUsageError(error.description)
}

var isDirectory: ObjCBool = false
guard FileManager.default.fileExists(atPath: options.directory, isDirectory: &isDirectory) else {
  exitWithUsageError("\(options.directory): no such file or directory")
}
guard isDirectory.boolValue else {
  exitWithUsageError("\(options.directory): not a directory")
}

let job = FindDuplicatesJob(
  root: URL(fileURLWithPath: options.directory).standardizedFileURL.path,
  minimumSize: options.minimumSize
)

// Ctrl-C cancels the job: its tasks stop at their next chunk or directory entry, and `run()`
// throws CancellationError once they all finished. The handler gets a queue of its own: on a
// global queue it could wait behind the tasks, which may keep every worker thread busy.
signal(SIGINT, SIG_IGN)
let interruption = DispatchSource.makeSignalSource(
  signal: SIGINT, queue: DispatchQueue(label: "find-duplicates.interrupt"))
interruption.setEventHandler { job.cancel() }
interruption.resume()

do {
  try await job.run()
  exit(0)
} catch is CancellationError {
  if ProgressLine.isTerminal {
    writeToStandardError(ProgressLine.eraseLine)
  }
  writeToStandardError("find-duplicates: interrupted\n")
  exit(130)
} catch {
  writeToStandardError("find-duplicates: \(error)\n")
  exit(1)
}
