/// Moments of a search where a test can act, so that a race (a file changed between two steps)
/// is reproduced deterministically instead of by timing. Each is `nil` by default and costs a
/// `nil` check where it would be called.
public struct SearchHooks: Sendable {
  /// Called each time a directory was read, before what it holds is looked at, with its path;
  /// in the job's per-task callback (one at a time). A test cancels the search here to stop it
  /// while it scans, whatever the machine's load.
  public var afterScanningDirectory: (@Sendable (_ directory: [UInt8]) -> Void)?
  /// Called once, when every hash is known and before any file is compared byte by byte, on
  /// the thread of the job's callback that sets up the comparison (not called if there is
  /// nothing to compare).
  public var beforeComparing: (@Sendable () -> Void)?
  /// Called by a comparing task each time it has compared the bytes of a reference file and the
  /// files equal to it over one range, before it checks with `fstat` that none of them changed;
  /// on the task's thread, with the paths of the files found equal (the reference first).
  public var afterComparingBytes: (@Sendable (_ paths: [[UInt8]]) -> Void)?

  /// No hooks.
  public init() {}
}
