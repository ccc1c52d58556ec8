import JobKit
import JobKitPostgres

/// A job of no-op remote tasks on one queue: task `index` has input `index` and key
/// `keyPrefix-index`.
class NoOpTasksJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the stored properties are immutable; subclasses say why theirs are safe.
  let count: Int
  let queue: RemoteQueue
  let keyPrefix: String

  init(count: Int, queue: RemoteQueue, keyPrefix: String) {
    self.count = count
    self.queue = queue
    self.keyPrefix = keyPrefix
    super.init()
  }

  /// The remote task for `index`.
  func work(_ index: Int) -> RemoteWork<NoOp> {
    RemoteWork<NoOp>(index, queue: queue, idempotencyKey: "\(keyPrefix)-\(index)")
  }
}

/// Tracks `count` no-op remote tasks at once and counts the results that came back right.
final class ManyRemoteTasks: NoOpTasksJob, @unchecked Sendable {
  // @unchecked Sendable: `correct` is only touched by the job's callbacks, which JobKit runs one
  // at a time, and read after the job finished.
  /// Tasks whose output was their input.
  private(set) var correct = 0

  override func main() {
    for index in 0..<count {
      trackAndQueue(resultOf: work(index)) { [self] result in
        if (try? result.get()) == index {
          correct += 1
        }
      }
    }
  }
}

/// Runs `count` no-op remote tasks one after another, each tracked when the previous one's
/// completion ran, and records the time from each `trackAndQueue` to its completion.
final class SequentialRemoteTasks: NoOpTasksJob, @unchecked Sendable {
  // @unchecked Sendable: the state is only touched by main() and the job's callbacks, which
  // JobKit runs one at a time, and read after the job finished.
  private let stopwatch = ContinuousClock()
  /// Each task's time from `trackAndQueue` to its completion, in order.
  private(set) var latencies: [Duration] = []
  /// Tasks whose output was not their input.
  private(set) var wrong = 0

  override func main() {
    next()
  }

  private func next() {
    let index = latencies.count
    guard index < count else { return }
    let task = work(index)
    let start = stopwatch.now
    trackAndQueue(resultOf: task) { [self] result in
      latencies.append(stopwatch.now - start)
      if (try? result.get()) != index {
        wrong += 1
      }
      next()
    }
  }
}
