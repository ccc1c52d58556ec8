// Nesting checks of jobkit-bench (issue 23, items 8 and 10). Child variants only, not part of the
// timed plan: `jobkit-bench --child VARIANT N` runs one alone, so a release build can be checked.
//
//   jobkit-bench --child nest-jobs 100000   # a chain of 100,000 nested JobControllers
//   jobkit-bench --child nest-cancel 100000 # the same chain cancelled from the root
//   jobkit-bench --child nest-grp 100000    # 100,000 nested groups, sequential and concurrent alternating
//   jobkit-bench --child nest-wait 6        # BlockTasks whose bodies runAndWait() the next level
//   jobkit-bench --child nest-run 6         # the same levels awaited with run() instead
//   jobkit-bench --child nest-raw 6         # the same with plain OperationQueues and waitUntilFinished
//
// The child prints its wall time and peak memory like every variant; a stack overflow crashes it.
import Foundation
import JobKit

/// A job whose `main()` tracks the next job of a chain `below` levels deep; the deepest tracks
/// `leaf`, if any.
final class ChainJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let below: Int
  let leaf: Operation?

  init(below: Int, queue: OperationQueue, leaf: Operation? = nil) {
    self.below = below
    self.leaf = leaf
    super.init(taskQueue: queue)
  }

  override func main() {
    if below > 0 {
      trackAndQueue(ChainJob(below: below - 1, queue: taskQueue, leaf: leaf))
    } else if let leaf {
      trackAndQueue(leaf)
    }
  }
}

/// A task that runs until it is cancelled, and says when it started.
final class UntilCancelled: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: `started` is a thread-safe semaphore.
  let started = DispatchSemaphore(value: 0)

  override func operationStart() {
    started.signal()
  }

  override func operationCancelled() {
    operationDone()
  }
}

/// A chain of `n` nested jobs (made as it runs) on one task queue, run to its end.
func runNestedJobs(_ n: Int) {
  let queue = OperationQueue()
  try! ChainJob(below: n - 1, queue: queue).runAndWait()
}

/// A chain of `n` nested jobs whose deepest task runs until cancelled: the root is cancelled once
/// that task started, and the cancel travels down every level.
func runNestedCancel(_ n: Int) {
  let queue = OperationQueue()
  let leaf = UntilCancelled()
  let root = ChainJob(below: n - 1, queue: queue, leaf: leaf)
  root.startJob()
  leaf.started.wait()
  root.cancel()
  root.waitUntilFinished()
  precondition(root.isCancelled && leaf.isFinished)
}

/// `n` groups, each the only task of the one above it, kinds alternating, run to its end.
func runNestedGroups(_ n: Int) {
  let queue = OperationQueue()
  var group: JobController = SequentialGroup([BlockTask {}], taskQueue: queue)
  for level in 1..<n {
    group =
      level.isMultiple(of: 2)
      ? SequentialGroup([group], taskQueue: queue) : ConcurrentGroup([group], taskQueue: queue)
  }
  try! group.runAndWait()
}

/// `n` levels of BlockTasks, each body blocking in `runAndWait()` on the next level: every level
/// holds a worker thread while the next runs.
func runNestedWaits(_ n: Int) {
  try! waitingLevel(n).runAndWait()
}

@Sendable func waitingLevel(_ k: Int) -> BlockTask {
  BlockTask {
    if k > 1 { try waitingLevel(k - 1).runAndWait() }
  }
}

/// As `nest-wait`, each level awaiting the next with `run()`: no thread is blocked.
func runNestedRuns(_ n: Int) {
  try! awaitingLevel(n).runAndWait()
}

@Sendable func awaitingLevel(_ k: Int) -> BlockTask {
  BlockTask(async: {
    if k > 1 { try await awaitingLevel(k - 1).run() }
  })
}

/// As `nest-wait` without JobKit: BlockOperations on one OperationQueue, each waiting for the next.
func runNestedRawWaits(_ n: Int) {
  let queue = OperationQueue()
  let top = rawWaitingLevel(n, on: queue)
  queue.addOperation(top)
  top.waitUntilFinished()
}

@Sendable func rawWaitingLevel(_ k: Int, on queue: OperationQueue) -> BlockOperation {
  BlockOperation {
    if k > 1 {
      let next = rawWaitingLevel(k - 1, on: queue)
      queue.addOperation(next)
      next.waitUntilFinished()
    }
  }
}

let nestingVariants: [Variant] = [
  Variant(name: "nest-jobs", baseline: "nest-jobs", summary: "a chain of N nested jobs", run: runNestedJobs),
  Variant(name: "nest-cancel", baseline: "nest-cancel", summary: "N nested jobs cancelled", run: runNestedCancel),
  Variant(name: "nest-grp", baseline: "nest-grp", summary: "N nested groups", run: runNestedGroups),
  Variant(name: "nest-wait", baseline: "nest-wait", summary: "N levels of runAndWait() in bodies", run: runNestedWaits),
  Variant(name: "nest-run", baseline: "nest-wait", summary: "N levels of await run() in bodies", run: runNestedRuns),
  Variant(name: "nest-raw", baseline: "nest-wait", summary: "N levels of waitUntilFinished", run: runNestedRawWaits),
]
