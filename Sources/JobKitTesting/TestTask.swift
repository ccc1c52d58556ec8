import Foundation
import JobKit

/// A task your test finishes or fails explicitly, with no sleeps: track it in a job, wait until
/// it started, then call ``finish(error:)``.
///
/// ```swift
/// let task = TestTask("download")
/// job.trackAndQueue(task)
/// job.startJob()
/// #expect(task.waitUntilStarted())   // or: await task.startedLatch.waitOpen()
/// task.finish(error: URLError(.timedOut))
/// ```
public final class TestTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: mutable state lives behind `lock`; the rest is immutable.
  private let lock = NSLock()
  private var startCount = 0
  private var cancelHookCount = 0
  /// Opened when the task starts.
  public let startedLatch = Latch()
  /// Opened when `operationCancelled()` runs.
  public let cancelledLatch = Latch()

  /// A label for messages and ordering checks.
  public let label: String
  /// Whether a `cancel()` while running finishes the task at once (as a cancellable task would);
  /// if `false`, the task keeps running until the test finishes it.
  public let finishesOnCancel: Bool

  /// Creates a task with a label; `finishesOnCancel` decides how it reacts to `cancel()`.
  public init(_ label: String = "", finishesOnCancel: Bool = true) {
    self.label = label
    self.finishesOnCancel = finishesOnCancel
    super.init()
    name = label.isEmpty ? nil : label
  }

  /// Whether `operationStart()` ran.
  public var didStart: Bool { lock.withLock { startCount > 0 } }

  /// How many times `operationCancelled()` ran (0 or 1).
  public var cancelHookCalls: Int { lock.withLock { cancelHookCount } }

  /// Blocks until the task started; `false` if `timeout` seconds passed first.
  @discardableResult
  public func waitUntilStarted(timeout: Double = 30) -> Bool { startedLatch.wait(timeout: timeout) }

  /// Finishes the task, with an optional error (the same as `operationDone(error:)`).
  public func finish(error: (any Error)? = nil) { operationDone(error: error) }

  /// Records the start and opens the started latch; the task then waits for ``finish(error:)``.
  public override func operationStart() {
    lock.withLock { startCount += 1 }
    startedLatch.open()
  }

  /// Records the cancel and, if ``finishesOnCancel``, finishes the task.
  public override func operationCancelled() {
    lock.withLock { cancelHookCount += 1 }
    cancelledLatch.open()
    if finishesOnCancel { operationDone() }
  }
}
