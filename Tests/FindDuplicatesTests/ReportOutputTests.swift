import FindDuplicatesCore
import Foundation
import Glibc
import Testing

@testable import FindDuplicatesCore

/// The state machine between the writer of the report and the thread that takes a signal:
/// synchronous, no threads.
@Suite struct ReportOutputStateTests {
  @Test func aSignalBetweenRecordsStopsAtOnce() {
    var state = ReportOutputState()
    #expect(state.beginRecord() == .write)
    #expect(state.endRecord() == .proceed)
    #expect(state.interrupt() == .stopped)
    #expect(state.beginRecord() == .stop)
    #expect(state.interrupt() == .stopped)
  }

  @Test func aSignalDuringARecordWaitsForItsEnd() {
    var state = ReportOutputState()
    #expect(state.beginRecord() == .write)
    #expect(state.interrupt() == .waitForRecord)
    #expect(state.interrupt() == .waitForRecord)
    #expect(state.endRecord() == .stopAndWakeInterrupter)
    #expect(state.beginRecord() == .stop)
    #expect(state.state == .stopped)
  }

  @Test func aSignalAfterTheLastRecordHasNothingToWaitFor() {
    var state = ReportOutputState()
    #expect(state.beginRecord() == .write)
    #expect(state.endRecord() == .proceed)
    state.finish()
    #expect(state.interrupt() == .stopped)
  }
}

/// Standard output: every write checked, and a signal stops the output at a record boundary.
/// The blocking parts run on threads of their own (``onThread(_:)``).
@Suite(.timeLimit(.minutes(1))) struct ReportOutputTests {
  @Test func aFullDeviceIsAFailure() async {
    let outcome = await onThread {
      let descriptor = open("/dev/full", O_WRONLY)
      defer { close(descriptor) }
      return ReportOutput(descriptor: descriptor).write([Array("a set\n".utf8)])
    }
    #expect(outcome == .failed(ENOSPC))
  }

  @Test func aClosedPipeIsNoFailure() async {
    // As with `| head` when SIGPIPE is ignored: EPIPE, which the tool ends on quietly.
    signal(SIGPIPE, SIG_IGN)
    let outcome = await onThread {
      var descriptors: [Int32] = [0, 0]
      pipe(&descriptors)
      close(descriptors[0])
      defer { close(descriptors[1]) }
      return ReportOutput(descriptor: descriptors[1]).write([Array("a set\n".utf8)])
    }
    #expect(outcome == .closed)
  }

  @Test func aSignalBeforeTheReportLeavesItAbsent() async {
    let (outcome, bytes) = await onThread {
      withPipe { descriptor in
        let output = ReportOutput(descriptor: descriptor)
        #expect(output.interrupt())
        return output.write([Array("{\"sets\":[]}\n".utf8)])
      }
    }
    #expect(outcome == .interrupted)
    #expect(bytes.isEmpty)
  }

  /// The writer has begun a record larger than the pipe holds, so it is blocked in `write(2)`
  /// with half of it written when the signal comes: the signal waits until the record is
  /// complete, and nothing follows it.
  @Test func aSignalDuringARecordEndsTheOutputAfterIt() async {
    let large = Array(repeating: UInt8(ascii: "a"), count: 200_000) + [UInt8(ascii: "\n")]
    let next = Array("next set\n".utf8)
    let result = await onThread { () -> (Bool, Bool, ReportOutput.Outcome, [UInt8]) in
      var descriptors: [Int32] = [0, 0]
      pipe(&descriptors)
      let writing = DispatchSemaphore(value: 0)
      let output = ReportOutput(descriptor: descriptors[1]) { index in
        if index == 0 { writing.signal() }
      }
      let written = DispatchSemaphore(value: 0)
      let outcome = OutcomeBox()
      Thread {
        outcome.value = output.write([large, next])
        written.signal()
      }.start()
      _ = writing.wait(timeout: .now() + 30)
      let atBoundary = output.interrupt()
      // Only now does anyone read: the record can complete.
      let reader = PipeReader(descriptors[0])
      let ended = output.waitForRecordEnd(timeout: .seconds(30))
      _ = written.wait(timeout: .now() + 30)
      close(descriptors[1])
      return (atBoundary, ended, outcome.value ?? .written, reader.finish())
    }
    let (atBoundary, ended, outcome, bytes) = result
    #expect(!atBoundary)
    #expect(ended)
    #expect(outcome == .interrupted)
    #expect(bytes == large)
  }

  /// Whatever batch a signal comes during, the output is whole records and stops after that
  /// batch: lines in text, sets ending in two NULs with -0, the whole document or nothing in JSON.
  @Test(arguments: [Options.OutputFormat.text, .nulSeparated, .json])
  func everyBoundaryIsAWholeRecord(format: Options.OutputFormat) async throws {
    let sets = (0..<10000).map { index in
      DuplicateSet(
        size: 100, paths: [Array("/tmp/a\(index)".utf8), Array("/tmp/b\(index) \u{1}".utf8)], distinctFiles: 2)
    }
    let report = DuplicateReport(
      sets: sets, skipped: [], statistics: ScanStatistics(), minimumSize: 1, listsHardLinks: false, elapsed: .zero)
    let records = ReportWriter.records(report, format: format)
    let whole = ReportWriter.standardOutput(report, format: format)
    #expect(Array(records.joined()) == whole)
    var lengths: [Int] = []
    for batch in [0, 1, 2, 100] {
      let (outcome, bytes) = await onThread {
        withPipe { descriptor in
          // The hook runs on the writer's thread once it began batch `batch`: the signal comes
          // while that batch is being written.
          let box = OutputBox()
          let output = ReportOutput(descriptor: descriptor) { index in
            if index == batch { #expect(box.output?.interrupt() == false) }
          }
          box.output = output
          return output.write(records)
        }
      }
      #expect(whole.starts(with: bytes))
      lengths.append(bytes.count)
      switch format {
      case .text:
        #expect(bytes.last == UInt8(ascii: "\n"))
        #expect(bytes.count == whole.count || bytes.suffix(2) == [UInt8(ascii: "\n"), UInt8(ascii: "\n")])
      case .nulSeparated:
        #expect(bytes.suffix(2) == [0, 0])
      case .json:
        #expect(bytes == whole || bytes.isEmpty)
        if !bytes.isEmpty { #expect(try JSONSerialization.jsonObject(with: Data(bytes)) is [String: Any]) }
      }
      // Text and -0 take more than 3 batches (about 64 KiB each), JSON one; there is no batch
      // 100, so the hook never interrupts it.
      let interrupted = format == .json ? batch == 0 : batch != 100
      #expect(outcome == (interrupted ? .interrupted : .written))
    }
    if format != .json {
      #expect(lengths[0] < lengths[1] && lengths[1] < lengths[2] && lengths[2] < lengths[3])
    }
    #expect(lengths.last == whole.count)
  }
}

private final class OutputBox: @unchecked Sendable {
  // @unchecked Sendable: `output` is set before the writing starts and only read after.
  var output: ReportOutput?
}

/// A pipe whose read end is drained on a thread while `body` writes to the write end.
private func withPipe(_ body: (Int32) -> ReportOutput.Outcome) -> (ReportOutput.Outcome, [UInt8]) {
  var descriptors: [Int32] = [0, 0]
  pipe(&descriptors)
  let reader = PipeReader(descriptors[0])
  let outcome = body(descriptors[1])
  close(descriptors[1])
  return (outcome, reader.finish())
}

/// Reads a descriptor to its end on a thread of its own.
private final class PipeReader: @unchecked Sendable {
  // @unchecked Sendable: `bytes` is written by the thread before `done` is signalled, read after.
  private var bytes: [UInt8] = []
  private let done = DispatchSemaphore(value: 0)

  init(_ descriptor: Int32) {
    Thread { [self] in
      var buffer = [UInt8](repeating: 0, count: 65536)
      while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        bytes += buffer[..<count]
      }
      close(descriptor)
      done.signal()
    }.start()
  }

  func finish() -> [UInt8] {
    _ = done.wait(timeout: .now() + 30)
    return bytes
  }
}

private final class OutcomeBox: @unchecked Sendable {
  // @unchecked Sendable: written by one thread before a semaphore is signalled, read after.
  var value: ReportOutput.Outcome?
}
