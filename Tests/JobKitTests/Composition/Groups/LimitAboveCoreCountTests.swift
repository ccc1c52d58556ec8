import Foundation
import Testing

@testable import JobKit

/// A limit above the core count is reached when tasks block on threads of their own: on Linux a
/// job's task queue runs on libdispatch's global pool, which starts as many threads as there are
/// active cores and adds one more only when its once-a-second monitor finds the others blocked.
/// The remedy documented in <doc:PoliciesAndObservation> ("Limits above the core count"): hand
/// the blocking part to a serial `DispatchQueue` (a `Work(callback:)`), whose threads are not
/// capped by the core count.
///
/// It holds 16 threads at a time for up to 0.3 s, twenty times: beside the other suites it
/// starves their dispatch threads (and they it), so it runs only when `JOBKIT_BLOCKING_TESTS` is
/// set; `.ci/run` runs it alone.
@Suite(
  "A limit above the core count",
  .enabled(if: ProcessInfo.processInfo.environment["JOBKIT_BLOCKING_TESTS"] != nil, "set JOBKIT_BLOCKING_TESTS=1")
)
struct LimitAboveCoreCountTests {
  /// How many blocking parts run at once; each blocks until `limit` run together, or `patience`
  /// (shorter than the pool monitor's second) passed.
  private final class Gauge: @unchecked Sendable {
    // @unchecked Sendable: every field is only touched under `condition`.
    private let condition = NSCondition()
    private var running = 0
    private(set) var peak = 0

    func block(until limit: Int, patience: TimeInterval) {
      condition.lock()
      running += 1
      peak = max(peak, running)
      condition.broadcast()
      let deadline = Date(timeIntervalSinceNow: patience)
      while peak < limit, condition.wait(until: deadline) {}
      running -= 1
      condition.unlock()
    }

    var reached: Int { condition.withLock { peak } }
  }

  private final class Blocking: JobController, @unchecked Sendable {
    let gauge = Gauge()
    let limit: Int

    init(limit: Int) {
      self.limit = limit
      super.init()
    }

    override func main() {
      setMaxConcurrentTasks(limit, forGroup: Work<Void>.self)
      for _ in 0..<(3 * limit) {
        let work = Work<Void>(callback: { [gauge, limit] complete in
          DispatchQueue(label: "JobKitTests.blocking").async {
            gauge.block(until: limit, patience: 0.3)
            complete(.success(()))
          }
        })
        trackAndQueue(resultOf: work) { _ in }
      }
    }
  }

  /// Far above the core count, so that threads the pool's monitor added in earlier runs (they
  /// linger once idle) cannot make up for the remedy: 16 blocking tasks at once, 20 runs.
  @Test func blockingTasksOnSerialQueuesReachTheirLimit() async throws {
    let limit = 16
    var reached = 0
    for _ in 0..<20 {
      let job = Blocking(limit: limit)
      try await job.run()
      #expect(job.gauge.reached <= limit)
      if job.gauge.reached == limit { reached += 1 }
    }
    #expect(reached >= 19, "reached the limit in \(reached) of 20 runs")
  }
}
