import Foundation

/// A single progress line on standard error, redrawn in place at most every 100 ms, and shown
/// only when standard error is a terminal (never in a pipe or a log file).
///
/// It needs no timer: the job calls ``update(_:)`` from its callbacks, and the line is redrawn
/// when enough time has passed since the last redraw. Not thread-safe; the job only uses it from
/// its callbacks, which run one at a time.
struct ProgressLine {
  /// Moves to the start of the line and erases it.
  static let eraseLine = "\r\u{1B}[K"

  static let isTerminal = isatty(STDERR_FILENO) != 0

  private let interval = Duration.milliseconds(100)
  private var lastDrawn: ContinuousClock.Instant?
  private var isShown = false

  /// Shows `text` unless the line was redrawn less than 100 ms ago. `text` is only evaluated
  /// when it is shown.
  mutating func update(_ text: @autoclosure () -> String) {
    guard Self.isTerminal else { return }
    let now = ContinuousClock.now
    if let lastDrawn, now - lastDrawn < interval { return }
    lastDrawn = now
    isShown = true
    writeToStandardError(Self.eraseLine + text())
  }

  /// Erases the line, if it is shown.
  mutating func clear() {
    guard isShown else { return }
    isShown = false
    writeToStandardError(Self.eraseLine)
  }
}
