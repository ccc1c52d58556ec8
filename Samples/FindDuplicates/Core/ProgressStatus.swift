import Foundation

/// How far a search has come, shared by the job and its tasks (which report as they read) and
/// read by the progress line on a timer. Thread-safe.
///
/// Each phase has a fixed total set when it begins, and only moves forward: a phase never shows
/// a lower figure than before, and phases only follow each other in order.
public final class ProgressStatus: @unchecked Sendable {
  // @unchecked Sendable: all mutable state is behind `lock`.

  /// The steps of a search, in order.
  public enum Phase: Int, Sendable, Comparable, CaseIterable {
    case scanning = 1
    case firstBlocks
    case hashing
    case comparing
    case done

    /// Phases compare in the order they run.
    public static func < (lhs: Phase, rhs: Phase) -> Bool { lhs.rawValue < rhs.rawValue }
  }

  /// The state at one moment.
  public struct Snapshot: Sendable, Equatable {
    /// The current phase.
    public var phase = Phase.scanning
    /// Scanning: regular files found so far.
    public var filesFound = 0
    /// Scanning: directories listed so far.
    public var directoriesScanned = 0
    /// Units of the current phase done: files for ``Phase/firstBlocks``, bytes after.
    public var done: Int64 = 0
    /// Units of the current phase in all, fixed when it begins.
    public var total: Int64 = 0

    /// The state before anything happened.
    public init() {}

    /// The fraction of the current phase that is done, rounded down to a whole percent, or `nil`
    /// while scanning (its total is unknown).
    public var percent: Int? {
      guard phase != .scanning else { return nil }
      guard total > 0 else { return 100 }
      return Int(min(done, total) * 100 / total)
    }
  }

  private let lock = NSLock()
  private var state = Snapshot()
  private var history: [Snapshot]?

  /// A status; with `recordsHistory`, every change is kept for ``recordedHistory`` (for tests).
  public init(recordsHistory: Bool = false) {
    history = recordsHistory ? [] : nil
  }

  /// The current state.
  public var current: Snapshot {
    lock.withLock { state }
  }

  /// Every state so far, if the status records its history.
  public var recordedHistory: [Snapshot] {
    lock.withLock { history ?? [] }
  }

  /// Counts what a scan found.
  func scanned(files: Int, directories: Int) {
    change {
      $0.filesFound += files
      $0.directoriesScanned += directories
    }
  }

  /// Starts `phase`, whose work adds up to `total` units. A phase before the current one is
  /// ignored (progress never goes back).
  func begin(_ phase: Phase, total: Int64) {
    change {
      guard phase > $0.phase else { return }
      $0.phase = phase
      $0.done = 0
      $0.total = total
    }
  }

  /// Counts `units` more units of the current phase as done.
  func advance(by units: Int64) {
    guard units > 0 else { return }
    change { $0.done = min($0.total, $0.done + units) }
  }

  private func change(_ body: (inout Snapshot) -> Void) {
    lock.withLock {
      body(&state)
      history?.append(state)
    }
  }
}
