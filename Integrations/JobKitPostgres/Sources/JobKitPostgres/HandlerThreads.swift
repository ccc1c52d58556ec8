import Foundation

/// Threads of their own for a worker's handlers, off Swift's cooperative pool: a handler that
/// computes or blocks for seconds holds one of these threads, never a thread that the worker's
/// heartbeats, claims and completions (and the database client) need. A thread is started when
/// a job comes and none is idle, up to `maxThreads` (the worker's `maxConcurrent`, so that each
/// running handler can have one); an idle thread waits for the next job, until ``stop()``.
///
/// As a `TaskExecutor` (where the platform has them) it runs the handlers' tasks:
/// `withTaskExecutorPreference(threads) { try await handler(input, context) }`.
final class HandlerThreads: @unchecked Sendable {
  // @unchecked Sendable: `jobs`, `threads` and `idle` are only touched with `condition` locked.
  private let condition = NSCondition()
  private var jobs: [() -> Void] = []
  private var first = 0
  private var threads = 0
  private var idle = 0
  /// Set when the worker stopped: a thread with nothing to run ends.
  private var stopping = false
  let maxThreads: Int
  let name: String

  init(maxThreads: Int, name: String) {
    self.maxThreads = max(1, maxThreads)
    self.name = name
  }

  /// Runs `job` on one of the threads, in the order jobs came.
  func run(_ job: @escaping () -> Void) {
    condition.lock()
    jobs.append(job)
    // A thread signalled but not yet awake still counts as idle: start one more whenever the
    // jobs waiting outnumber the idle threads, or a second job waits behind a blocking first.
    let start = jobs.count - first > idle && threads < maxThreads
    if start { threads += 1 }
    condition.signal()
    condition.unlock()
    if start {
      let thread = Thread { [self] in loop() }
      thread.name = name
      thread.start()
    }
  }

  /// Lets the threads end once they have nothing to run (a job that comes later still runs).
  func stop() {
    condition.lock()
    stopping = true
    condition.broadcast()
    condition.unlock()
  }

  /// Jobs waiting for a thread and threads started (for tests).
  var counts: (waiting: Int, threads: Int) {
    condition.lock()
    defer { condition.unlock() }
    return (jobs.count - first, threads)
  }

  private func loop() {
    while true {
      condition.lock()
      idle += 1
      while first == jobs.count && !stopping {
        condition.wait()
      }
      idle -= 1
      guard first < jobs.count else {
        threads -= 1
        condition.unlock()
        return
      }
      let job = jobs[first]
      first += 1
      if first == jobs.count {
        jobs.removeAll(keepingCapacity: true)
        first = 0
      }
      condition.unlock()
      job()
    }
  }
}

@available(macOS 15.0, iOS 18.0, watchOS 11.0, tvOS 18.0, visionOS 2.0, *)
extension HandlerThreads: TaskExecutor {
  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    run { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
  }
}
