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
  ///
  /// The stripe is global, so other tests' `track` calls wait while it is held: the holding
  /// thread queues the task and waits for its route itself, so the hold lasts as long as that
  /// route (or the timeout, if the finish needs the lock), whatever the cooperative pool does.
  @Test func aPlainTasksFinishTakesNoStripeLock() async throws {
    let task = BlockOperation {}
    task.completionBlock = {}
    let job = OneTaskJob(task)
    let finished = Task { try await job.run() }
    let key = OperationKey(task)
    let stripe = CompletionBlockHook.stripe(for: key)
    // `main()` tracked the task once the hook is registered.
    #expect(await eventually { stripe.withLock { $0.hooks[key] != nil } })
    let routedWhileHeld = Locked(false)
    let done = Latch()
    let queue = OperationQueue()
    Thread {
      stripe.withLock { _ in
        queue.addOperation(task)
        let routed = job.routed.wait(timeout: 10)
        routedWhileHeld.mutate { $0 = routed }
      }
      done.open()
    }.start()
    #expect(await done.waitOpen())
    #expect(routedWhileHeld.value)
    try await finished.value
    #expect(job.routed.opened)
  }
}
