import Dispatch
import Glibc

/// The progress line on standard error: redrawn in place ten times a second from a timer, so it
/// moves while one large file is read, and shown only when standard error is a terminal.
///
/// The text is cut to one column less than the terminal's width (`TIOCGWINSZ`; else the
/// `COLUMNS` variable; else 80), so it never wraps into a stray line.
public final class ProgressLine: @unchecked Sendable {
  // @unchecked Sendable: `lastText` and `isShown` are only touched on `queue`.

  /// Moves to the start of the line and erases it.
  public static let eraseLine = "\r\u{1B}[K"

  /// Whether standard error is a terminal.
  public static var isTerminal: Bool { isatty(STDERR_FILENO) != 0 }

  private let status: ProgressStatus
  private let queue = DispatchQueue(label: "find-duplicates.progress")
  private var timer: (any DispatchSourceTimer)?
  private var lastText = ""
  private var isShown = false

  /// A line that shows `status`; ``start()`` starts drawing.
  public init(status: ProgressStatus) {
    self.status = status
  }

  /// Starts redrawing every 100 ms, if standard error is a terminal.
  public func start() {
    guard Self.isTerminal else { return }
    let timer = DispatchSource.makeTimerSource(queue: queue)
    timer.schedule(deadline: .now() + .milliseconds(100), repeating: .milliseconds(100))
    timer.setEventHandler { [unowned self] in draw() }
    queue.sync { self.timer = timer }
    timer.resume()
  }

  /// Stops drawing and erases the line. Returns once the line is erased.
  public func stop() {
    queue.sync {
      timer?.cancel()
      timer = nil
      if isShown {
        isShown = false
        write(Self.eraseLine)
      }
    }
  }

  private func draw() {
    guard timer != nil else { return }
    let text = Self.text(for: status.current, width: Self.terminalWidth())
    guard text != lastText else { return }
    lastText = text
    isShown = true
    write(Self.eraseLine + text)
  }

  private func write(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
      var offset = 0
      while offset < bytes.count {
        let written = Glibc.write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
        if written <= 0 { if written < 0 && errno == EINTR { continue } else { return } }
        offset += written
      }
    }
  }

  /// The terminal's width in columns.
  public static func terminalWidth() -> Int {
    var size = winsize()
    if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 {
      return Int(size.ws_col)
    }
    if let columns = getenv("COLUMNS").flatMap({ Int(String(cString: $0)) }), columns > 0 {
      return columns
    }
    return 80
  }

  /// The line for `snapshot`, at most `width - 1` characters (all ASCII, one column each).
  public static func text(for snapshot: ProgressStatus.Snapshot, width: Int) -> String {
    let text: String
    switch snapshot.phase {
    case .scanning:
      text = "[1/4] Scanning: \(snapshot.filesFound) files in \(snapshot.directoriesScanned) directories"
    case .firstBlocks:
      text = "[2/4] Hashing first blocks: \(snapshot.percent ?? 0)% (\(snapshot.done)/\(snapshot.total) files)"
    case .hashing:
      text =
        "[3/4] Hashing: \(snapshot.percent ?? 0)% (\(formatBytes(snapshot.done)) of \(formatBytes(snapshot.total)))"
    case .comparing:
      text =
        "[4/4] Comparing: \(snapshot.percent ?? 0)% (\(formatBytes(snapshot.done)) of \(formatBytes(snapshot.total)))"
    case .done:
      text = "Writing the report"
    }
    let limit = max(0, width - 1)
    return text.count <= limit ? text : String(text.prefix(limit))
  }
}
