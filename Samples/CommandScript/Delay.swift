import Foundation
import JobKit

/// A task that finishes after a delay, MGCommand's `DelayCommand`: a one-shot `DispatchSourceTimer`
/// that `cancel()` stops early. It counts itself in the group's context when it finishes.
final class Delay: ConcurrentOperation, ContextConsuming, @unchecked Sendable {
  // @unchecked Sendable: `timer` is only touched on `queue` (serial); `context` is set by the group
  // before the task is queued; the rest is immutable.
  let label: String
  let seconds: Double
  let log: ScriptLog
  var context: JobContext?
  private let queue = DispatchQueue(label: "CommandScript.Delay")
  private var timer: (any DispatchSourceTimer)?

  init(_ label: String, seconds: Double, log: ScriptLog) {
    self.label = label
    self.seconds = seconds
    self.log = log
    super.init()
  }

  override func operationStart() {
    log.print("\(label) started")
    queue.async { [self] in
      let timer = DispatchSource.makeTimerSource(queue: queue)
      timer.setEventHandler { [self] in end(cancelled: false) }
      timer.schedule(deadline: .now() + seconds)
      self.timer = timer
      timer.resume()
    }
  }

  override func operationCancelled() {
    queue.async { [self] in end(cancelled: true) }
  }

  /// Runs on `queue`, once: whichever of the timer and the cancel comes first.
  private func end(cancelled: Bool) {
    guard let timer, !timer.isCancelled else { return }
    timer.cancel()
    context?.update(.delaysDone, default: 0) { $0 += 1 }
    log.print("\(label) \(cancelled ? "cancelled" : "done")")
    operationDone()
  }
}

extension ContextKey where Value == Int {
  /// How many delays have finished.
  static let delaysDone = ContextKey("delaysDone")
}
