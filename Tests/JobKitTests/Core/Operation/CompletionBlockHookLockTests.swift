import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// How many JobKit locks a plain task's finish takes before its per-task callback (issue 19:
/// at most two; three from `track`): the hook's registry stripe is not one of them unless
/// another job tracks the same task.
@Suite("Completion block hook: locks on a plain task's finish")
struct CompletionBlockHookLockTests {
  private final class OneTaskJob: JobController, @unchecked Sendable {
    // @unchecked Sendable: the task and the latch are set before the job starts, never changed.
    let task: BlockOperation
    let tracked = Latch()
    let routed = Latch()

    init(_ task: BlockOperation) {
      self.task = task
      super.init()
    }

    override func main() {
      // Observed, not queued: the test signals its finish itself.
      track(task) { [routed] _ in routed.open() }
      tracked.open()
    }
  }

  /// The task's finish is signalled while another thread holds the lock of its hook's stripe:
  /// the job routes it all the same, because the finish takes the hook's phase with one atomic
  /// exchange. (When the finish took the stripe lock to retire the hook, the callback waited for
  /// the lock: this test then fails after 30 s.)
  ///
  /// The stripe is global, so other tests' `track` calls wait while it is held; so that the hold
  /// depends on nothing they could hold up (the dispatch pool, the cooperative pool), the task is
  /// never queued: a thread of its own runs its completion block (JobKit's wrapper) as Foundation
  /// would, and the holding thread waits for the route itself.
  @Test func aPlainTasksFinishTakesNoStripeLock() async throws {
    let task = BlockOperation {}
    task.completionBlock = {}
    let job = OneTaskJob(task)
    let finished = Task { try await job.run() }
    // `main()` tracked the task (its block is JobKit's wrapper now) and returned.
    #expect(await job.tracked.waitOpen())
    let stripe = CompletionBlockHook.stripe(for: OperationKey(task))
    let wrapper = try #require(task.completionBlock)
    let routedWhileHeld = Locked(false)
    let done = Latch()
    Thread {
      stripe.withLock { _ in
        Thread { wrapper() }.start()
        let routed = job.routed.wait(timeout: 30)
        routedWhileHeld.mutate { $0 = routed }
      }
      done.open()
    }.start()
    #expect(await done.waitOpen(timeout: 60))  // longer than the wait inside
    #expect(routedWhileHeld.value)
    try await finished.value
    #expect(job.routed.opened)
  }
}
