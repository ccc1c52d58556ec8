import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Limits while the job stops (issue 23): thousands of small jobs whose limited group is being
/// tracked, retried and run while another thread cancels or fails the job at a random moment.
@Suite("JobController limits across stops, stress")
struct JobControllerLimitStopStressTests {
  /// Invariant, per job: the limited group never has more than `limit` tasks executing at once
  /// (counted from the moment the queue starts a task until just before it finishes, whether it
  /// runs its body or was cancelled before it started; and, separately, bodies only); every task
  /// made (every attempt) finishes; and, when events are listened to, every `taskTracked` has
  /// exactly one `taskFinished` of the same task, after it. Jobs come from a seeded generator;
  /// the stop's moment and the threads' interleaving do not.
  @Test(arguments: [1 as UInt64, 2])
  func aLimitHoldsWhileStopsRaceTrackingAndEveryTaskGetsOneFinishEvent(seed: UInt64) async {
    let jobs = 2_000
    let concurrentJobs = 4
    var generator = SeededGenerator(seed: seed)
    let plans = (0..<jobs).map { JobPlan(number: $0, using: &generator) }
    var problems: [String] = []
    for start in stride(from: 0, to: plans.count, by: concurrentJobs) {
      let batch = plans[start..<min(start + concurrentJobs, plans.count)]
      await withTaskGroup(of: [String].self) { group in
        for plan in batch {
          group.addTask { await run(plan) }
        }
        for await found in group {
          problems += found
        }
      }
    }
    for kind in ["limit", "unfinished", "events", "hang"] {
      let found = problems.filter { $0.hasPrefix(kind + ":") }
      #expect(found.isEmpty, "\(found.count) problem(s), first: \(found.prefix(5))")
    }
  }

  /// One job: its limit, its tasks, when and how it is stopped, whether events are listened to.
  struct JobPlan: Sendable {
    struct TaskPlan: Sendable {
      let spins: Int
      /// Attempt 1 fails and is retried after `retryDelay`.
      let retried: Bool
      let retryDelay: Duration
    }

    let number: Int
    let limit: Int
    let tasks: [TaskPlan]
    let stopSpins: Int
    let fails: Bool
    let listens: Bool

    init(number: Int, using generator: inout SeededGenerator) {
      self.number = number
      limit = Int.random(in: 1...2, using: &generator)
      tasks = (0..<Int.random(in: 2...12, using: &generator)).map { _ in
        TaskPlan(
          spins: Int.random(in: 0..<3_000, using: &generator),
          retried: Int.random(in: 0..<5, using: &generator) == 0,
          retryDelay: .microseconds(Int.random(in: 0..<500, using: &generator)))
      }
      stopSpins = Int.random(in: 0..<6_000, using: &generator)
      fails = Bool.random(using: &generator)
      listens = Bool.random(using: &generator)
    }
  }

  /// Counts a group's executing tasks (and running bodies) and keeps the highest counts seen.
  final class Meter: @unchecked Sendable {
    // @unchecked Sendable: wraps a `Locked`.
    private let counts = Locked((executing: 0, maxExecuting: 0, bodies: 0, maxBodies: 0))

    func enter(body: Bool) {
      counts.mutate {
        $0.executing += 1
        $0.maxExecuting = max($0.maxExecuting, $0.executing)
        if body {
          $0.bodies += 1
          $0.maxBodies = max($0.maxBodies, $0.bodies)
        }
      }
    }

    func leave(body: Bool) {
      counts.mutate {
        $0.executing -= 1
        if body { $0.bodies -= 1 }
      }
    }

    var highest: (executing: Int, bodies: Int) {
      let value = counts.value
      return (value.maxExecuting, value.maxBodies)
    }
  }

  /// The limited group's task: runs a little while, ignores cancels (so the task holding a
  /// slot keeps it while the job stops), and counts itself in its meter.
  final class Counted: ConcurrentOperation, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    let meter: Meter
    let spins: Int
    let failure: (any Error)?

    init(_ name: String, spins: Int, failure: (any Error)?, meter: Meter) {
      self.meter = meter
      self.spins = spins
      self.failure = failure
      super.init()
      self.name = name
    }

    override func operationStart() {
      meter.enter(body: true)
      spin(spins)
      meter.leave(body: true)
      operationDone(error: failure)
    }

    /// The queue started it after a cancel: it finishes at once without running, but it did
    /// take a place in the queue.
    override func startCancelled() {
      meter.enter(body: false)
      meter.leave(body: false)
      super.startCancelled()
    }
  }

  final class Job: JobController, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    let plan: JobPlan
    let meter = Meter()
    let made = Locked<[Counted]>([])
    let mainStarted = Latch()

    init(_ plan: JobPlan) {
      self.plan = plan
      super.init()
    }

    override func main() {
      setMaxConcurrentTasks(plan.limit, forGroup: Counted.self)
      mainStarted.open()
      for (index, task) in plan.tasks.enumerated() {
        guard task.retried else {
          trackAndQueue(make("\(index)", spins: task.spins, failure: nil))
          continue
        }
        let policy = RetryPolicy(maxAttempts: 2, initialDelay: task.retryDelay, jitter: false)
        trackAndQueue(options: TaskOptions(retry: policy)) { [self] attempt in
          make("\(index)", spins: task.spins, failure: attempt == 1 ? TestError(1) : nil)
        }
      }
    }

    private func make(_ name: String, spins: Int, failure: (any Error)?) -> Counted {
      let task = Counted(name, spins: spins, failure: failure, meter: meter)
      made.mutate { $0.append(task) }
      return task
    }
  }

  /// Runs one planned job with a thread that stops it; returns what went wrong.
  private func run(_ plan: JobPlan) async -> [String] {
    let job = Job(plan)
    let finished = Latch()
    job.completionBlock = { finished.open() }
    let collector = plan.listens ? collect(job.events) : nil
    let stopper = Thread {
      guard job.mainStarted.wait(timeout: 30) else { return }
      spin(plan.stopSpins)
      if plan.fails {
        job.fail(TestError(2))
      } else {
        job.cancel()
      }
    }
    stopper.start()
    job.startJob()
    guard await finished.waitOpen(timeout: 30) else {
      return ["hang: job \(plan.number) did not finish\n\(job.debugDescription)"]
    }
    job.completionBlock = nil
    var problems: [String] = []
    let highest = job.meter.highest
    if highest.executing > plan.limit || highest.bodies > plan.limit {
      problems.append(
        "limit: job \(plan.number), limit \(plan.limit): \(highest.executing) executing, \(highest.bodies) bodies at once"
      )
    }
    let unfinished = job.made.value.filter { !$0.isFinished }.compactMap(\.name)
    if !unfinished.isEmpty {
      problems.append("unfinished: job \(plan.number): \(unfinished)")
    }
    if let collector {
      problems += finishEventProblems(await collector.value).map { "events: job \(plan.number): \($0)" }
    }
    return problems
  }

  private func collect(_ events: AsyncStream<JobEvent>) -> Task<[JobEvent], Never> {
    Task { await events.reduce(into: []) { $0.append($1) } }
  }
}

/// Busy work for `iterations` rounds: lets a task run (or a thread wait) a little, with no sleep.
func spin(_ iterations: Int) {
  var value: UInt64 = 0
  for round in 0..<iterations {
    value = value &* 6_364_136_223_846_793_005 &+ UInt64(round)
  }
  if value == 42 { print("") }  // keeps the loop from being optimised away
}
