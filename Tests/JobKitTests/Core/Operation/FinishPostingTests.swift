import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// The finishing thread's mark (issue 42): while a thread posts an operation's finish
/// notifications, Foundation's read of that operation's `isFinished` there takes no lock, so a
/// `Work`'s finish takes its mutex once (its finish transition).
@Suite("ConcurrentOperation: the finish being posted")
struct FinishPostingTests {
  /// The mark is this thread's, for this operation, only while its post runs; a nested post (an
  /// observer finishing another operation on the same thread) marks that one and gives the mark
  /// back when it returns.
  @Test func theMarkHoldsForThePostedOperationOnThisThreadOnly() {
    let outer = ManualTask()
    let inner = ManualTask()
    var seen: [String] = []
    func record(_ label: String) {
      seen.append("\(label): \(outer.isPostingFinish) \(inner.isPostingFinish)")
    }
    record("before")
    outer.whilePostingFinish {
      record("outer")
      inner.whilePostingFinish { record("inner") }
      record("back")
    }
    record("after")
    let expected = [
      "before: false false", "outer: true false", "inner: false true", "back: true false", "after: false false",
    ]
    #expect(seen == expected)

    // Another thread, during the post, does not see this thread's mark.
    let elsewhere = Locked<Bool?>(nil)
    let asked = Latch()
    outer.whilePostingFinish {
      Thread {
        elsewhere.mutate { $0 = outer.isPostingFinish }
        asked.open()
      }.start()
      _ = asked.wait(timeout: 30)
    }
    #expect(asked.opened)
    #expect(elsewhere.value == false)
  }

  /// Inside the post, on the posting thread, `isFinished` answers `true` without the operation's
  /// mutex: another thread holds that mutex until the answer came (at most 30 s). (When the
  /// getter took the mutex, the answer came only once the holder gave up: this test then fails
  /// after 30 s.) Elsewhere, and after the post, the getter reads the state under the mutex.
  @Test func isFinishedInsideThePostTakesNoLock() async {
    let task = ManualTask()
    task.start()
    task.finish()
    let held = Latch()
    let answered = Latch()
    let answeredWhileHeld = Locked(false)
    let answer = Locked<Bool?>(nil)
    let done = Latch()
    Thread {
      SharedLocks.withLock(for: task) {
        held.open()
        let inTime = answered.wait(timeout: 30)
        answeredWhileHeld.mutate { $0 = inTime }
      }
      done.open()
    }.start()
    Thread {
      _ = held.wait(timeout: 30)
      task.whilePostingFinish {
        let isFinished = task.isFinished
        answer.mutate { $0 = isFinished }
      }
      answered.open()
    }.start()
    #expect(await done.waitOpen(timeout: 60))  // longer than the hold
    #expect(answeredWhileHeld.value)
    #expect(answer.value == true)
    #expect(task.isFinished)
    #expect(!ManualTask().isFinished)
  }

  /// The whole finish of a queued `Work`, through Foundation: dependents, `waitUntilFinished()`
  /// and `completionBlock` are released, and a job tracking it gets its result.
  @Test func aWorksFinishStillReleasesWhatFoundationReleases() async throws {
    let queue = OperationQueue()
    let work = Work { 7 }
    let dependent = BlockOperation {}
    dependent.addDependency(work)
    let completed = Latch()
    work.completionBlock = { completed.open() }
    queue.addOperation(work)
    queue.addOperation(dependent)
    #expect(dependent.finishes(within: 30))
    #expect(work.isFinished && !work.isExecuting)
    #expect(await completed.waitOpen(timeout: 30))
    #expect(try work.result?.get() == 7)

    final class OneWork: JobController, @unchecked Sendable {
      // @unchecked Sendable: `value` is only written by the task's completion, read after run().
      let value = Locked<Int?>(nil)
      override func main() {
        trackAndQueue(resultOf: Work { 8 }) { [value] result in value.mutate { $0 = try? result.get() } }
      }
    }
    let job = OneWork()
    try await job.run()
    #expect(job.value.value == 8)
  }
}
