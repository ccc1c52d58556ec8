import Foundation
import JobKit

/// A step of a script under test: records `label` in `log` when it runs, then finishes, inline
/// (`.inline`, like MGCommand's synchronous commands) or later from another thread (`.later`,
/// like its asynchronous ones), optionally with `error`.
final class Step: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `log` is thread-safe.
  enum Finish {
    case inline
    case later
  }

  let label: String
  let log: EventLog
  let finish: Finish
  let failure: (any Error)?
  let body: (@Sendable () -> Void)?

  init(
    _ label: String, log: EventLog, finish: Finish = .inline, failure: (any Error)? = nil,
    body: (@Sendable () -> Void)? = nil
  ) {
    self.label = label
    self.log = log
    self.finish = finish
    self.failure = failure
    self.body = body
    super.init()
  }

  override func operationStart() {
    body?()
    switch finish {
    case .inline:
      log.record(label)
      operationDone(error: failure)
    case .later:
      DispatchQueue.global().async { [self] in
        log.record(label)
        operationDone(error: failure)
      }
    }
  }
}

/// A task that records the context its group handed it.
final class ContextProbe: ConcurrentOperation, ContextConsuming, @unchecked Sendable {
  // @unchecked Sendable: `context` is written by the group before the task is queued and read
  // after it finished; `seen` is written in operationStart, read after the finish.
  var context: JobContext?
  private(set) var seen: JobContext?
  let write: (@Sendable (JobContext) -> Void)?

  init(write: (@Sendable (JobContext) -> Void)? = nil) {
    self.write = write
    super.init()
  }

  override func operationStart() {
    seen = context
    if let context { write?(context) }
    operationDone()
  }
}

/// Runs `body` on a new thread and suspends until it returned, for code that blocks, such as
/// `runAndWait()`.
///
/// A blocking wait must never run on a libdispatch worker thread: on Linux those few threads
/// (about two per core) run Swift concurrency's jobs, OperationQueue operations and
/// `DispatchQueue.global()` blocks alike, so a test blocking one (in an async test, in a
/// `BlockOperation` body or a `DispatchQueue.global().async` block) holds back the async work of
/// every test running at the same time, the code that would release its wait included.
func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
  await withCheckedContinuation { continuation in
    let thread = Thread { continuation.resume(returning: body()) }
    thread.start()
  }
}

/// Suspends until the current Swift task is cancelled, then throws `CancellationError`: the work
/// of an async body that only a cancel ends.
func suspendUntilCancelled() async throws {
  let state = Locked<(cancelled: Bool, waiting: CheckedContinuation<Void, Never>?)>((false, nil))
  await withTaskCancellationHandler {
    await withCheckedContinuation { continuation in
      let resumeNow = state.mutate { state -> Bool in
        if state.cancelled { return true }
        state.waiting = continuation
        return false
      }
      if resumeNow { continuation.resume() }
    }
  } onCancel: {
    let waiting = state.mutate { state -> CheckedContinuation<Void, Never>? in
      state.cancelled = true
      defer { state.waiting = nil }
      return state.waiting
    }
    waiting?.resume()
  }
  try Task.checkCancellation()
}

extension ContextKey where Value == String {
  static let foo1 = ContextKey("foo1")
  static let foo2 = ContextKey("foo2")
  static let text = ContextKey("text")
}

extension ContextKey where Value == Int {
  static let counter = ContextKey("counter")
}

/// The two group kinds, for tests that hold for both.
enum GroupKind: String, CaseIterable, Sendable {
  case sequential
  case concurrent

  func make(_ tasks: [Operation] = []) -> GroupJob {
    switch self {
    case .sequential: return SequentialGroup(tasks)
    case .concurrent: return ConcurrentGroup(tasks)
    }
  }

  func make(_ tasks: [Operation], taskQueue: OperationQueue) -> GroupJob {
    switch self {
    case .sequential: return SequentialGroup(tasks, taskQueue: taskQueue)
    case .concurrent: return ConcurrentGroup(tasks, taskQueue: taskQueue)
    }
  }
}

extension Latch {
  /// Suspends until the latch is open, blocking no thread. `false` on timeout.
  func opened(timeout seconds: Double = 30) async -> Bool {
    await waitOpen(timeout: seconds)
  }
}

extension Operation {
  /// `finishes(within:)`, waiting on a thread of its own.
  func finishedSoon(within seconds: Double = 30) async -> Bool {
    await onThread { self.finishes(within: seconds) }
  }
}
