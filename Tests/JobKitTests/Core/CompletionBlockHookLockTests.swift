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
    let routed = Latch()

    init(_ task: BlockOperation) {
      self.task = task
      super.init()
    }

    override func main() {
      // Observed, not queued: the test runs it once it holds the stripe lock.
      track(task) { [routed] _ in routed.open() }
    }
  }

  /// The task finishes while another thread holds the lock of its hook's stripe: the job routes
  /// it all the same, because the finish takes the hook's phase with one atomic exchange. (When
  /// the finish took the stripe lock to retire the hook, the callback waited for the lock.)
  @Test func aPlainTasksFinishTakesNoStripeLock() async throws {
    let task = BlockOperation {}
    task.completionBlock = {}
    let job = OneTaskJob(task)
    let finished = Task { try await job.run() }
    let key = OperationKey(task)
    let stripe = CompletionBlockHook.stripe(for: key)
    // `main()` tracked the task once the hook is registered.
    #expect(await eventually { stripe.withLock { $0.hooks[key] != nil } })
    let holding = Latch()
    let release = Latch()
    let holder = Thread {
      stripe.withLock { _ in
        holding.open()
        _ = release.wait(timeout: 30)
      }
    }
    holder.start()
    #expect(await holding.waitOpen())
    OperationQueue().addOperation(task)
    let routedWhileHeld = await job.routed.waitOpen(timeout: 10)
    release.open()
    #expect(routedWhileHeld)
    try await finished.value
    #expect(job.routed.opened)
  }
}
