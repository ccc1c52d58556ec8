import Foundation

/// Prints lines prefixed with the time since the script started, e.g. `[+1.00s] delay 2 done`.
struct ScriptLog: Sendable {
  private let start = ContinuousClock.now

  func print(_ message: String) {
    let elapsed = ContinuousClock.now - start
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    Swift.print(String(format: "[+%.2fs] ", seconds) + message)
  }
}
