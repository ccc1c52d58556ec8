import Foundation
import JobKit

/// A one-shot gate a test awaits without blocking a thread: `wait()` suspends until `open()` was
/// called (from any thread, before or after the wait).
final class PipelineGate: @unchecked Sendable {
  // @unchecked Sendable: `state` is only touched under `lock`.
  private enum State {
    case closed([CheckedContinuation<Void, Never>])
    case open
  }

  private let lock = NSLock()
  private var state = State.closed([])

  func open() {
    lock.lock()
    let waiters: [CheckedContinuation<Void, Never>]
    switch state {
    case .closed(let continuations):
      waiters = continuations
      state = .open
    case .open:
      waiters = []
    }
    lock.unlock()
    for waiter in waiters {
      waiter.resume()
    }
  }

  func wait() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      lock.lock()
      switch state {
      case .closed(let continuations):
        state = .closed(continuations + [continuation])
        lock.unlock()
      case .open:
        lock.unlock()
        continuation.resume()
      }
    }
  }
}

/// Suspends until the current Swift task is cancelled (at once if it already is).
func suspendUntilTaskCancelled() async {
  let cancelled = PipelineGate()
  await withTaskCancellationHandler {
    await cancelled.wait()
  } onCancel: {
    cancelled.open()
  }
}

/// A serial dispatch queue that can tell whether the current code runs on it.
final class PipelineMarkedQueue: @unchecked Sendable {
  // @unchecked Sendable: immutable after init; DispatchQueue and its specific keys are thread-safe.
  let queue: DispatchQueue
  private let key = DispatchSpecificKey<String>()
  private let label: String

  init(_ label: String) {
    self.label = label
    queue = DispatchQueue(label: label)
    queue.setSpecific(key: key, value: label)
  }

  /// `true` when called from a work item running on this queue.
  var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == label }

  /// Suspends until every work item submitted to the queue so far has run.
  func drain() async {
    await withCheckedContinuation { continuation in
      queue.async { continuation.resume() }
    }
  }
}

/// Where a handler ran, as a test records it.
struct PipelineHandlerContext: Equatable, Sendable {
  let isMainThread: Bool
  let isOnMarkedQueue: Bool
}
