import JobKit
import JobKitPostgres

/// Tracks `count` no-op remote tasks at once and counts the results that came back right.
final class ManyRemoteTasks: JobController, @unchecked Sendable {
  // @unchecked Sendable: `correct` is only touched by the job's callbacks, which JobKit runs one
  // at a time, and read after the job finished.
  private let count: Int
  private let queue: RemoteQueue
  private let keyPrefix: String
  /// Tasks whose output was their input.
  private(set) var correct = 0

  init(count: Int, queue: RemoteQueue, keyPrefix: String) {
    self.count = count
    self.queue = queue
    self.keyPrefix = keyPrefix
    super.init()
  }

  override func main() {
    for index in 0..<count {
      let work = RemoteWork<NoOp>(index, queue: queue, idempotencyKey: "\(keyPrefix)-\(index)")
      trackAndQueue(resultOf: work) { [self] result in
        if case .success(let output) = result, output == index {
          correct += 1
        }
      }
    }
  }
}

/// Runs `count` no-op remote tasks one after another, each tracked when the previous one's
/// completion ran, and records the time from each `trackAndQueue` to its completion.
final class SequentialRemoteTasks: JobController, @unchecked Sendable {
  // @unchecked Sendable: the state is only touched by main() and the job's callbacks, which
  // JobKit runs one at a time, and read after the job finished.
  private let count: Int
  private let queue: RemoteQueue
  private let keyPrefix: String
  private let stopwatch = ContinuousClock()
  /// Each task's time from `trackAndQueue` to its completion, in order.
  private(set) var latencies: [Duration] = []
  /// Tasks whose output was not their input.
  private(set) var wrong = 0

  init(count: Int, queue: RemoteQueue, keyPrefix: String) {
    self.count = count
    self.queue = queue
    self.keyPrefix = keyPrefix
    super.init()
  }

  override func main() {
    next()
  }

  private func next() {
    let index = latencies.count
    guard index < count else { return }
    let work = RemoteWork<NoOp>(index, queue: queue, idempotencyKey: "\(keyPrefix)-\(index)")
    let start = stopwatch.now
    trackAndQueue(resultOf: work) { [self] result in
      latencies.append(stopwatch.now - start)
      if (try? result.get()) != index {
        wrong += 1
      }
      next()
    }
  }
}
