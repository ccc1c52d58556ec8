import Foundation
import Glibc

/// Writes the report to a descriptor (standard output) record by record, checking every write,
/// so that the output is never silently lost and a signal never cuts a record in half.
///
/// - A write error (ENOSPC on a full disk or `/dev/full`, EIO) ends the writing with
///   ``Outcome/failed(_:)``: the caller says so and exits with status 1.
/// - A reader that went away (EPIPE, when SIGPIPE is ignored) ends it with ``Outcome/closed``:
///   the caller stops quietly, as SIGPIPE would have stopped it.
/// - ``interrupt()`` (the thread that took SIGINT or SIGTERM) stops the writing at a record
///   boundary: at once between records, else once the record being written is complete
///   (``waitForRecordEnd(timeout:)``). Records are written whole, so the output ends on a whole
///   line (text), a whole set (`-0`), or is the whole JSON document or nothing (`--json`).
///
/// The state is a ``ReportOutputState`` under a lock; the system calls run outside it.
public final class ReportOutput: @unchecked Sendable {
  // @unchecked Sendable: `state` is only touched under `lock`; `descriptor` and `hooks` never change.

  /// How a call to ``write(_:)`` ended.
  public enum Outcome: Sendable, Equatable {
    /// Every record was written.
    case written
    /// A signal stopped the output at a record boundary; nothing more will be written.
    case interrupted
    /// The reader closed the pipe (EPIPE).
    case closed
    /// A write failed with this `errno` value.
    case failed(Int32)
  }

  /// Consecutive records are written together until they reach this many bytes: few system
  /// calls, and a signal never waits for more than about this much output.
  public static let batchSize = 64 * 1024

  /// The descriptor written to.
  public let descriptor: Int32
  /// Called by the writer when it has begun a batch of records (the state says it is writing),
  /// before its first `write(2)`: tests interrupt at that moment.
  let willWriteBatch: (@Sendable (_ index: Int) -> Void)?
  private let lock = NSLock()
  private var state = ReportOutputState()
  private let recordEnded = DispatchSemaphore(value: 0)

  /// An output to `descriptor`.
  public init(descriptor: Int32, willWriteBatch: (@Sendable (_ index: Int) -> Void)? = nil) {
    self.descriptor = descriptor
    self.willWriteBatch = willWriteBatch
  }

  /// Writes `records` in order, batching small ones, and then marks the report complete.
  /// Call it once, from one thread.
  public func write(_ records: [[UInt8]]) -> Outcome {
    var start = 0
    var batchIndex = 0
    defer { lock.withLock { state.finish() } }
    while start < records.count {
      var end = start
      var batch: [UInt8] = []
      while end < records.count, batch.isEmpty || batch.count + records[end].count <= Self.batchSize {
        batch += records[end]
        end += 1
      }
      let outcome = writeRecord(batch, index: batchIndex)
      guard outcome == .written else { return outcome }
      start = end
      batchIndex += 1
    }
    return .written
  }

  /// Stops the output at a record boundary (from the thread that took the signal): `true` if it
  /// is at one and stays there, `false` if a record is being written; then
  /// ``waitForRecordEnd(timeout:)`` returns once the writer completed it and stopped.
  @discardableResult
  public func interrupt() -> Bool {
    lock.withLock { state.interrupt() } == .stopped
  }

  /// After ``interrupt()`` returned `false`: waits until the record being written is complete;
  /// `false` if it is not after `timeout`.
  public func waitForRecordEnd(timeout: DispatchTimeInterval) -> Bool {
    recordEnded.wait(timeout: .now() + timeout) == .success
  }

  private func writeRecord(_ bytes: [UInt8], index: Int) -> Outcome {
    guard lock.withLock({ state.beginRecord() }) == .write else { return .interrupted }
    willWriteBatch?(index)
    let outcome = Self.writeAll(bytes, to: descriptor)
    let action = lock.withLock { state.endRecord() }
    if action == .stopAndWakeInterrupter {
      recordEnded.signal()
      if outcome == .written { return .interrupted }
    }
    return outcome
  }

  /// Writes all of `bytes` to `descriptor`, retrying after EINTR and partial writes.
  public static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Outcome {
    bytes.withUnsafeBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        if written > 0 {
          offset += written
        } else if written == 0 {
          return .failed(EIO)
        } else if errno == EINTR {
          continue
        } else if errno == EPIPE {
          return .closed
        } else {
          return .failed(errno)
        }
      }
      return .written
    }
  }
}
