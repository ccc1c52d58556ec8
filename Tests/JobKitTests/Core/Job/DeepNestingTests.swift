import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 23, item 8: a chain of nested jobs finishes level after level on one thread without
/// nesting the levels on its stack, and a nested job's progress is summed without recursion.
@Suite("Deep nesting")
struct DeepNestingTests {
  /// A chain of `deepNestingLevels` nested jobs, started, whose deepest level runs a task that
  /// finishes when told; returned once that task started.
  private func startedChain() async -> (root: ChainJob, deepest: ManualTask) {
    let deepest = ManualTask("deepest")
    let root = ChainJob(
      below: deepNestingLevels - 1, queue: ChainJob.sharedQueue, probe: StackProbe(),
      leaf: { job in job.trackAndQueue(deepest) })
    root.startJob()
    #expect(await deepest.startedLatch.waitOpen(timeout: 120))
    return (root, deepest)
  }

  /// `deepNestingLevels` nested jobs (100,000 in CI): the deepest task finishes, then each level in turn. Before the fix this
  /// recursed once per level and crashed (about 4,000 levels in a debug build), and so did
  /// reading the root's `fractionCompleted` while every level ran.
  @Test func aHundredThousandNestedJobsFinish() async throws {
    let levels = deepNestingLevels
    let deepest = ManualTask("deepest")
    let probe = StackProbe()
    let root = ChainJob(
      below: levels - 1, queue: ChainJob.sharedQueue, probe: probe,
      leaf: { job in job.trackAndQueue(deepest) })
    _ = root.progress
    root.startJob()
    #expect(await deepest.startedLatch.waitOpen(timeout: 120))
    // Every level waits for one nested job (the deepest for its task): nothing is done yet. The
    // fraction is summed level by level, without recursion.
    #expect(root.fractionCompleted == 0)
    // On a thread of its own: the whole chain finishes on this thread, which must not be one of
    // Swift concurrency's few.
    Thread { deepest.finish() }.start()
    #expect(try await finishes(root, startingIt: false))
    #expect(probe.calls == levels)
    #expect(probe.widestSpread < StackProbe.allowedSpread)
    #expect(root.fractionCompleted == 1)
  }

  /// Cancelling the root of `deepNestingLevels` nested jobs (100,000 in CI) cancels every level down to the deepest task,
  /// and the chain finishes cancelled.
  @Test func cancellingAHundredThousandNestedJobs() async throws {
    let (root, deepest) = await startedChain()
    // On a thread of its own, like the finish above.
    Thread { root.cancel() }.start()
    #expect(await deepest.cancelledLatch.waitOpen(timeout: 120))
    await #expect(throws: CancellationError.self) { _ = try await finishes(root, startingIt: false) }
  }

  /// Suspending the root of `deepNestingLevels` nested jobs (100,000 in CI) suspends every level
  /// down to the deepest task before `suspend()` returns, and `resume()` resumes them all, level
  /// after level on the calling thread's step drain rather than nested on its stack (issue 20).
  @Test func suspendingAndResumingAHundredThousandNestedJobs() async throws {
    let (root, deepest) = await startedChain()
    // On threads of their own, like the finish above: each walks the whole chain.
    #expect(
      await onThread {
        root.suspend()
        return deepest.isSuspended
      })
    #expect(
      await onThread {
        root.resume()
        return !deepest.isSuspended
      })
    Thread { deepest.finish() }.start()
    #expect(try await finishes(root, startingIt: false))
  }

  /// The iterative sum weighs each level as the recursive one did: a nested job counts as one
  /// task of its parent, split among its own tasks.
  @Test func aNestedJobCountsAsOneTaskOfItsParentSplitAmongItsOwn() async throws {
    let a = ManualTask("a")
    let b = ManualTask("b")
    let c = ManualTask("c")
    let routedA = Latch()
    let routedB = Latch()
    let inner = ScriptedJob { job in
      job.trackAndQueue(b) { _ in routedB.open() }
      job.trackAndQueue(c)
    }
    let root = ScriptedJob { job in
      job.trackAndQueue(inner)
      job.trackAndQueue(a) { _ in routedA.open() }
    }
    _ = root.progress
    root.startJob()
    for task in [a, b, c] {
      #expect(await task.startedLatch.waitOpen())
    }
    #expect(root.fractionCompleted == 0)
    // A task's routing is counted right after its completion returns: wait for the count.
    b.finish()
    #expect(await routedB.waitOpen())
    #expect(await fraction(of: root, reaches: 0.25))  // (0 + 1/2) / 2
    a.finish()
    #expect(await routedA.waitOpen())
    #expect(await fraction(of: root, reaches: 0.75))  // (1 + 1/2) / 2
    c.finish()
    try await root.run()
    #expect(root.fractionCompleted == 1)
  }

  /// The stack of the thread that finishes a chain does not grow with the chain: every level's
  /// `allTasksFinished()` runs at about the same depth. (Before the fix, 2,000 levels spread over
  /// megabytes of stack, so this fails without crashing.)
  @Test func finishingAChainDoesNotGrowTheStack() async throws {
    let probe = StackProbe()
    let root = ChainJob(below: 1_999, queue: ChainJob.sharedQueue, probe: probe)
    #expect(try await finishes(root))
    #expect(probe.calls == 2_000)
    #expect(probe.widestSpread < StackProbe.allowedSpread)
  }

  /// Whether `job.fractionCompleted` becomes `expected` within 30 s. The count of a routed task
  /// is published just after its completion returned, so a test that waited for the completion
  /// may read the fraction a moment early.
  private func fraction(of job: JobController, reaches expected: Double) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(30)
    while job.fractionCompleted != expected {
      if ContinuousClock.now >= deadline { return false }
      await Task.yield()
    }
    return true
  }

  /// Waits for `job` to finish (started here unless `startingIt` is false), without blocking a thread; `false` on a hang.
  private func finishes(_ job: JobController, startingIt: Bool = true) async throws -> Bool {
    let done = Latch()
    if startingIt { job.startJob() }
    Task {
      try? await job.waitForFinish()
      done.open()
    }
    let finished = await done.waitOpen(timeout: 120)
    if finished { try job.throwOutcome() }
    return finished
  }
}

/// A job whose `main()` tracks the next job of the chain (`below` more levels), or, at the
/// bottom, runs `leaf`. Every level records its stack depth in `allTasksFinished()`. The chain
/// is made as it runs, so no object holds the levels below it before they run.
final class ChainJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  /// One queue for every level: a chain holds no thread while it waits, only queue entries.
  static let sharedQueue: OperationQueue = {
    let queue = OperationQueue()
    queue.name = "DeepNestingTests.chain"
    return queue
  }()

  let below: Int
  let probe: StackProbe
  let leaf: (@Sendable (JobController) -> Void)?

  init(below: Int, queue: OperationQueue, probe: StackProbe, leaf: (@Sendable (JobController) -> Void)? = nil) {
    self.below = below
    self.probe = probe
    self.leaf = leaf
    super.init(taskQueue: queue)
  }

  override func main() {
    if below > 0 {
      trackAndQueue(ChainJob(below: below - 1, queue: taskQueue, probe: probe, leaf: leaf))
    } else {
      leaf?(self)
    }
  }

  override func allTasksFinished() {
    probe.record()
  }
}

/// Records, per thread, the lowest and highest stack address seen by `record()`.
final class StackProbe: @unchecked Sendable {
  // @unchecked Sendable: the state is guarded by `lock`.
  /// Far less than the stack a few hundred levels of nested finishing needed before the fix,
  /// far more than the frames between a drain and one level's callback.
  static let allowedSpread = 256 * 1024

  private let lock = NSLock()
  private var ranges: [UInt: (low: UInt, high: UInt)] = [:]
  private var count = 0

  @inline(never)
  func record() {
    var marker = 0
    let address = withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
    let thread = currentThreadID()
    lock.lock()
    defer { lock.unlock() }
    count += 1
    let range = ranges[thread] ?? (address, address)
    ranges[thread] = (min(range.low, address), max(range.high, address))
  }

  var calls: Int {
    lock.lock()
    defer { lock.unlock() }
    return count
  }

  /// The widest range of stack addresses seen on one thread.
  var widestSpread: Int {
    lock.lock()
    defer { lock.unlock() }
    return ranges.values.map { Int($0.high - $0.low) }.max() ?? 0
  }
}
