import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task that finishes on a global queue, a moment after it started.
private final class HopTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: no state of its own.
  override func operationStart() {
    DispatchQueue.global().async { self.operationDone() }
  }
}

/// A job whose `main()` tracks a planned list of tasks, counting each per-task callback.
private final class StressJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; `calls` is a `Locked`.
  enum Kind { case instant, hop, limited, nested }
  /// What each task's callback does besides counting.
  enum Action { case none, suspendAndResumeFromAThread, cancel }
  let kinds: [Kind]
  let actions: [Action]
  let calls: Locked<[Int]>
  let nested = Locked<[JobController]>([])

  init(kinds: [Kind], actions: [Action]) {
    self.kinds = kinds
    self.actions = actions
    calls = Locked(Array(repeating: 0, count: kinds.count))
    super.init()
  }

  final class Limited: ConcurrentOperation, @unchecked Sendable {
    // @unchecked Sendable: no state of its own.
    override func operationStart() {
      DispatchQueue.global().async { self.operationDone() }
    }
  }

  override func main() {
    setMaxConcurrentTasks(2, forGroup: Limited.self)
    for (index, kind) in kinds.enumerated() {
      let action = actions[index]
      let count: @Sendable (Operation) -> Void = { [calls, unowned self] _ in
        calls.mutate { $0[index] += 1 }
        switch action {
        case .none: break
        case .suspendAndResumeFromAThread:
          suspend()
          Thread { self.resume() }.start()
        case .cancel: cancel()
        }
      }
      switch kind {
      case .instant: trackAndQueue(InstantTask(), completion: count)
      case .hop: trackAndQueue(HopTask(), completion: count)
      case .limited: trackAndQueue(Limited(), completion: count)
      case .nested:
        let child = ClosureJob { child in
          for _ in 0..<3 { child.trackAndQueue(HopTask()) }
        }
        nested.mutate { $0.append(child) }
        trackAndQueue(child, completion: count)
      }
    }
  }
}

/// Suspend and resume racing the tasks, each other and cancels (issue 20, item 2). Invariant:
/// every job and every nested job finishes (no task waits for a resume that came, none is
/// lost); a job that was not cancelled delivers every per-task callback exactly once, a
/// cancelled one at most once; nothing is left suspended after the last resume.
@Suite("Suspend stress", .timeLimit(.minutes(3)))
struct SuspendStressTests {
  @Test(arguments: [11 as UInt64, 12, 13])
  func randomSuspendsResumesAndCancelsLoseNothing(seed: UInt64) async {
    var random = SeededGenerator(seed: seed)
    let kinds: [StressJob.Kind] = [.instant, .hop, .limited, .nested]
    let taskCount = 120
    // Per job, a random run of suspends and resumes from outside, and a tenth of its tasks'
    // callbacks suspending it and resuming it from a new thread; one job in five is cancelled,
    // from outside or from a callback. Every suspend is followed by a resume.
    var plans: [[Int]] = []  // 0: suspend, 1: resume, 2: cancel
    var cancelled = Set<Int>()
    var jobs: [StressJob] = []
    for index in 0..<24 {
      var plan = (0..<Int.random(in: 2...12, using: &random)).map { _ in Int.random(in: 0...1, using: &random) }
      var actions = (0..<taskCount).map { _ -> StressJob.Action in
        Int.random(in: 0..<10, using: &random) == 0 ? .suspendAndResumeFromAThread : .none
      }
      if Int.random(in: 0..<5, using: &random) == 0 {
        cancelled.insert(index)
        if Bool.random(using: &random) {
          // Suspended first: the cancel must let the held-back tasks finish.
          plan.insert(contentsOf: [0, 2], at: Int.random(in: 0...plan.count, using: &random))
        } else {
          actions[Int.random(in: 0..<taskCount, using: &random)] = .cancel
        }
      }
      plans.append(plan + [1])
      let taskKinds = (0..<taskCount).map { _ in kinds.randomElement(using: &random)! }
      jobs.append(StressJob(kinds: taskKinds, actions: actions))
    }
    let allJobs = jobs
    let finalPlans = plans
    for job in jobs { job.startJob() }
    await concurrently(allJobs.count) { index in
      let job = allJobs[index]
      for step in finalPlans[index] {
        switch step {
        case 0: job.suspend()
        case 1: job.resume()
        default: job.cancel()
        }
      }
    }
    for (index, job) in jobs.enumerated() {
      let finished = await job.finishedSoon(within: 60)
      #expect(finished, "job \(index) (seed \(seed)) did not finish")
      guard finished else { continue }
      #expect(!job.isSuspended)
      let calls = job.calls.value
      if cancelled.contains(index) {
        #expect(calls.allSatisfy { $0 <= 1 })
      } else {
        #expect(calls.allSatisfy { $0 == 1 }, "job \(index): callbacks \(calls.filter { $0 != 1 }.count) off")
      }
      for child in job.nested.value {
        #expect(child.isFinished && !child.isSuspended)
      }
    }
  }
}
