// The cases that set a job of JobKit's own operations against Swift concurrency and GCD: the same
// N no-op tasks, each with a per-task callback, as a job of `Work` or `BlockTask`, as a
// `withTaskGroup`, and as `DispatchQueue.async` with a serial hop. Child variants, so
// `jobkit-bench --child VARIANT N` runs each alone (under callgrind, for example).
import Foundation
import JobKit

/// (n) A JobController tracking N `Work { 1 }` tasks with `trackAndQueue(resultOf:completion:)`,
/// a group completion and `allTasksFinished`. Baseline: `tg`.
final class WorkJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the counters are only touched from main() and the job's callbacks.
  let n: Int
  private(set) var finishedTasks = 0
  private(set) var sum = 0
  private(set) var allFinishedCalls = 0

  init(n: Int) {
    self.n = n
    super.init()
  }

  override func main() {
    for _ in 0..<n {
      trackAndQueue(resultOf: Work { 1 }) { [unowned self] result in
        finishedTasks += 1
        if case .success(let value) = result { sum += value }
      }
    }
  }

  override func allTasksFinished() {
    allFinishedCalls += 1
  }

  func runToEnd() {
    startJob()
    waitUntilFinished()
    precondition(finishedTasks == n && sum == n && allFinishedCalls == 1)
  }
}

func runWorkJob(_ n: Int) {
  WorkJob(n: n).runToEnd()
}

/// (o) As `job`, with N `BlockTask {}`s (a JobKit operation, observed without a completionBlock).
func runBlockTaskJob(_ n: Int) {
  CountingJob(n: n) { BlockTask {} }.runToEnd()
}

/// (p) `withTaskGroup`: N no-op child tasks, a per-task callback in its `for await`. Run from a
/// detached task; the caller blocks on a semaphore until the group returned.
func runTaskGroup(_ n: Int) {
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    var count = 0
    await withTaskGroup(of: Int.self) { group in
      for _ in 0..<n {
        group.addTask { 1 }
      }
      for await value in group {
        count += value
      }
    }
    precondition(count == n)
    done.signal()
  }
  done.wait()
}

/// (q) GCD: N no-op blocks on the global queue, each hopping to one serial queue for its per-task
/// callback, which signals once the last one ran.
func runDispatch(_ n: Int) {
  let callbacks = DispatchQueue(label: "jobkit-bench.gcd")
  let done = DispatchSemaphore(value: 0)
  let finished = SerialCounter()
  for _ in 0..<n {
    DispatchQueue.global().async {
      callbacks.async {
        finished.value += 1
        if finished.value == n { done.signal() }
      }
    }
  }
  done.wait()
}

/// The cases against Swift concurrency and GCD.
public let taskGroupVariants: [Variant] = [
  Variant(
    name: "tg", baseline: "tg", summary: "(p) withTaskGroup: N no-op children, a callback per task in for await",
    run: runTaskGroup),
  Variant(
    name: "gcd", baseline: "tg", summary: "(q) DispatchQueue.global().async + a serial hop per task", run: runDispatch),
  Variant(
    name: "job-work", baseline: "tg",
    summary: "(n) JobController tracking N Work { 1 } with trackAndQueue(resultOf:) completions",
    run: runWorkJob),
  Variant(
    name: "job-blk", baseline: "tg", summary: "(o) JobController tracking N BlockTasks, callbacks as (b)",
    run: runBlockTaskJob),
]

/// A counter touched on one serial queue only.
final class SerialCounter: @unchecked Sendable {
  // @unchecked Sendable: only touched on one serial queue.
  var value = 0
}
