import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 23, item 6, for the core's public stores of user values: a job's clock, handlers,
/// completions and task options, and the diagnostics' handlers are released after JobKit's locks.
/// Each probe's `deinit` calls back into the object that dropped it (a member that takes its lock).
@Suite("Core releases the user's values outside its locks", .timeLimit(.minutes(1)))
struct CoreReleaseOutsideLocksTests {
  /// A user's clock, holding a probe.
  private struct ProbedClock: JobClock {
    let probe: ReleaseProbe
    func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any JobTimer {
      DispatchJobClock().schedule(after: delay, action)
    }
  }

  @Test func aReplacedClock() async {
    let job = ScriptedJob { _ in }
    var probe: ReleaseProbe? = ReleaseProbe { [weak job] in _ = job?.clock }
    let released = probe!.released
    job.clock = ProbedClock(probe: probe!)
    probe = nil
    onOwnThread { job.clock = DispatchJobClock() }
    #expect(await released.waitOpen(timeout: 30))
  }

  @Test func aReplacedGroupHandler() async {
    let job = ScriptedJob { _ in }
    var probe: ReleaseProbe? = ReleaseProbe { [weak job] in _ = job?.failures }
    let released = probe!.released
    job.setCompletion(forGroup: InstantTask.self) { [probe] in _ = probe }
    probe = nil
    onOwnThread { job.setCompletion(forGroup: InstantTask.self) {} }
    #expect(await released.waitOpen(timeout: 30))
  }

  enum Held: String, CaseIterable, Sendable {
    /// A group handler, dropped when the job finishes.
    case groupHandler
    /// A task's completion closure, dropped once the task was routed.
    case completion
    /// A retry policy's `retryIf` and the attempt factory.
    case retryOptions
  }

  @Test(arguments: Held.allCases)
  func whatAFinishedJobHeld(held: Held) async throws {
    let released = Locked<Latch?>(nil)
    let job = ScriptedJob { job in
      let probe = ReleaseProbe { [weak job] in _ = job?.failures }
      released.mutate { $0 = probe.released }
      switch held {
      case .groupHandler:
        job.setCompletion(forGroup: InstantTask.self) { [probe] in _ = probe }
        job.trackAndQueue(InstantTask())
      case .completion:
        job.trackAndQueue(InstantTask()) { [probe] _ in _ = probe }
      case .retryOptions:
        let policy = RetryPolicy(maxAttempts: 2, initialDelay: .zero) { [probe] _ in
          withExtendedLifetime(probe) { false }
        }
        job.trackAndQueue(retrying: policy) { [probe] _ in
          withExtendedLifetime(probe) { InstantTask(failure: TestError(1)) }
        } completion: { _ in
        }
      }
    }
    job.startJob()
    #expect(await job.finishedSoon(within: 30))
    #expect(await released.value?.waitOpen(timeout: 30) == true)
  }

  /// A job whose `TestTask`s run one at a time (a limit of 1), tracked in order; the completion
  /// of `tasks[probed]` holds a probe (calling into the job when released) and opens `routed`.
  private func limitedJob(
    tracking tasks: [TestTask], probing probed: Int, routed: Latch, released: Locked<Latch?>
  ) -> ScriptedJob {
    ScriptedJob { job in
      let probe = ReleaseProbe { [weak job] in _ = job?.failures }
      released.mutate { $0 = probe.released }
      job.setMaxConcurrentTasks(1, forGroup: TestTask.self)
      for (index, task) in tasks.enumerated() {
        if index == probed {
          job.trackAndQueue(task) { [probe] _ in
            _ = probe
            routed.open()
          }
        } else {
          job.trackAndQueue(task)
        }
      }
    }
  }

  /// A limited group's line keeps admitted nodes until it compacts: a node admitted, run and
  /// routed before that held its completion closure in the line alone, and the compaction (under
  /// the job's lock, when a later slot is released) must not be what drops it.
  @Test func aRoutedNodeAdmittedFromItsGroupsLine() async throws {
    let tasks = (0..<4).map { TestTask("t\($0)") }
    let routed = Latch()
    let released = Locked<Latch?>(nil)
    let job = limitedJob(tracking: tasks, probing: 1, routed: routed, released: released)
    job.startJob()
    #expect(tasks[0].waitUntilStarted())
    tasks[0].finish()
    #expect(tasks[1].waitUntilStarted())
    tasks[1].finish()
    #expect(await routed.waitOpen(timeout: 30))
    #expect(tasks[2].waitUntilStarted())
    onOwnThread { tasks[2].finish() }
    #expect(await released.value?.waitOpen(timeout: 30) == true)
    #expect(tasks[3].waitUntilStarted())
    tasks[3].finish()
    #expect(await job.finishedSoon(within: 30))
  }

  /// A task waiting in its limited group's line that finished without being admitted (the user
  /// queued it by hand: misuse, reported): once routed, the line held its node's last reference,
  /// with the completion closure. The slot's release must not drop it under the job's lock.
  @Test func aNodeThatLeftItsGroupsLineUnadmitted() async throws {
    let holder = TestTask("holder")
    let waiter = TestTask("waiter")
    let routed = Latch()
    let released = Locked<Latch?>(nil)
    let job = limitedJob(tracking: [holder, waiter], probing: 1, routed: routed, released: released)
    job.startJob()
    #expect(holder.waitUntilStarted())
    #expect(!waiter.didStart)
    OperationQueue().addOperation(waiter)
    #expect(waiter.waitUntilStarted())
    waiter.finish()
    #expect(await routed.waitOpen(timeout: 30))
    onOwnThread { holder.finish() }
    #expect(await released.value?.waitOpen(timeout: 30) == true)
    #expect(await job.finishedSoon(within: 30))
  }

  /// `JobKitDiagnostics`: an operation's own misuse handler, replaced or removed.
  @Test(arguments: [false, true])
  func aReplacedScopedMisuseHandler(remove: Bool) async {
    let operation = InstantTask()
    var probe: ReleaseProbe? = ReleaseProbe { _ = JobKitDiagnostics.misuseHandler }
    let released = probe!.released
    do {
      let probed: JobKitDiagnostics.MisuseHandler = { [probe] _, _ in withExtendedLifetime(probe) {} }
      JobKitDiagnostics.setMisuseHandler(probed, for: operation)
    }
    probe = nil
    let silent: JobKitDiagnostics.MisuseHandler = { _, _ in }
    let replacement = remove ? nil : silent
    onOwnThread { JobKitDiagnostics.setMisuseHandler(replacement, for: operation) }
    #expect(await released.waitOpen(timeout: 30))
    JobKitDiagnostics.setMisuseHandler(nil, for: operation)
  }
}
