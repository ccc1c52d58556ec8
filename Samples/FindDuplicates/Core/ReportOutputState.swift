/// Where the writing of the report stands, between the thread that writes it record by record
/// and the thread that takes SIGINT or SIGTERM: a pure state machine, driven by
/// ``ReportOutput`` under its lock.
///
/// A record is the unit the output may end at (a duplicate set and its lines, or the whole JSON
/// document): once begun it is written to its end, and a signal that arrives meanwhile waits for
/// that end; after it, nothing more is written.
struct ReportOutputState: Equatable {
  enum State: Equatable {
    /// Between records.
    case idle
    /// A record is being written.
    case writing
    /// A record is being written and a signal asked to stop after it.
    case writingInterrupted
    /// Interrupted, or the report is complete: nothing more is written.
    case stopped
  }

  private(set) var state = State.idle

  /// What the writer does with its next record.
  enum BeginAction: Equatable {
    case write
    /// Interrupted: the output ends here.
    case stop
  }

  /// What the writer does once its record is written (or failed).
  enum EndAction: Equatable {
    /// Go on with the next record.
    case proceed
    /// Stop, and wake the thread that waits in ``ReportOutput/interrupt()`` for this record.
    case stopAndWakeInterrupter
  }

  /// What the signal's thread does.
  enum InterruptAction: Equatable {
    /// The output is at a record boundary and stays there: exit now.
    case stopped
    /// A record is being written: wait until the writer ends it.
    case waitForRecord
  }

  /// The writer is about to write a record.
  mutating func beginRecord() -> BeginAction {
    switch state {
    case .idle:
      state = .writing
      return .write
    case .stopped:
      return .stop
    case .writing, .writingInterrupted:
      preconditionFailure("one record at a time")
    }
  }

  /// The writer wrote its record, or failed to.
  mutating func endRecord() -> EndAction {
    switch state {
    case .writing:
      state = .idle
      return .proceed
    case .writingInterrupted:
      state = .stopped
      return .stopAndWakeInterrupter
    case .idle, .stopped:
      preconditionFailure("no record is being written")
    }
  }

  /// The report is complete (or failed): a later signal has nothing to wait for.
  mutating func finish() {
    switch state {
    case .idle, .stopped:
      state = .stopped
    case .writing, .writingInterrupted:
      preconditionFailure("a record is being written")
    }
  }

  /// SIGINT or SIGTERM arrived.
  mutating func interrupt() -> InterruptAction {
    switch state {
    case .idle, .stopped:
      state = .stopped
      return .stopped
    case .writing, .writingInterrupted:
      state = .writingInterrupted
      return .waitForRecord
    }
  }
}
