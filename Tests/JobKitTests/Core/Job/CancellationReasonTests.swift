import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job that tracks `tasks` and, if given, a nested job (which tracks its own), and nothing else.
private final class TreeJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let tasks: [Operation]
  init(_ tasks: [Operation]) {
    self.tasks = tasks
    super.init()
  }
  override func main() {
    for task in tasks { trackAndQueue(task) }
  }
}

/// A job tracking a task `t` and a nested job tracking `deep`, each with an optional time limit
/// on one `ManualClock`.
private struct Tree {
  let clock = ManualClock()
  let task = ManualTask("t")
  let deep: ManualTask
  let nested: TreeJob
  let job: TreeJob

  init(limit: Duration? = nil, nestedLimit: Duration? = nil) {
    let deep = ManualTask("deep")
    let nested = TreeJob([deep])
    (self.deep, self.nested, job) = (deep, nested, TreeJob([task, nested]))
    for (limited, limit) in [(job, limit), (nested, nestedLimit)] where limit != nil {
      limited.clock = clock
      limited.timeLimit = limit
    }
  }

  /// Starts the job; returns once both tasks run and the limits' timers are armed.
  func start() async {
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    #expect(await deep.startedLatch.waitOpen())
    #expect(await clock.waitForScheduled([job, nested].filter { $0.timeLimit != nil }.count))
  }
}

private func reason(of operation: ConcurrentOperation) -> TestError? {
  operation.cancellationReason as? TestError
}

@Suite("Cancellation reasons and time limits")
struct CancellationReasonTests {
  // MARK: Reasons

  @Test func aPlainCancelStillThrowsCancellationError() async {
    let task = ManualTask("t")
    let job = TreeJob([task])
    #expect(job.cancellationReason == nil)
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    #expect(job.cancellationReason is CancellationError)
    #expect(task.cancellationReason is CancellationError)
  }

  /// A parent's cancel records its reason on the job before the job's state records the stop;
  /// a `fail(_:)` of the job's own can record its stop in between. The stop the job's state
  /// recorded decides: the job fails, its reason is its error, and that is what it hands down,
  /// to the tasks it cancels and to one tracked later.
  @Test func aTaskTrackedWhileTheJobStopsGetsTheReasonTheJobReports() async {
    let task = ManualTask("t", finishesOnCancel: false)
    let job = TreeJob([task])
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    // As a parent's cancel(handingDown:) does first:
    _ = job.state.withLock { $0.recordCancellationReason(TestError(1)) }
    job.fail(TestError(2))
    let late = ManualTask("late")
    job.trackAndQueue(late)
    task.finish()
    await #expect(throws: TestError(2)) { try await job.run() }
    #expect(job.error as? TestError == TestError(2))
    #expect(reason(of: job) == TestError(2))
    #expect(reason(of: task) == TestError(2))
    #expect(reason(of: late) == TestError(2))
  }

  /// A `cancel(reason:)` records its reason before it asks the job's state to stop; a task's
  /// failure under `.failFast` can record the job's stop in between (here the cancel's first
  /// step alone, then the failure). The job fails with the task's error, which is also its
  /// reason and what its other tasks are cancelled with.
  @Test func aFailFastStopBetweenACancelsTwoStepsIsTheReason() async {
    let failing = ManualTask("failing")
    let other = ManualTask("other")
    let job = TreeJob([failing, other])
    job.failurePolicy = .failFast
    job.startJob()
    #expect(await failing.startedLatch.waitOpen())
    #expect(await other.startedLatch.waitOpen())
    // cancel(reason:)'s first step:
    _ = job.state.withLock { $0.recordCancellationReason(TestError(1)) }
    failing.finish(error: TestError(2))
    await #expect(throws: TestError(2)) { try await job.run() }
    #expect(job.error as? TestError == TestError(2))
    #expect(reason(of: job) == TestError(2))
    #expect(reason(of: other) == TestError(2))
    // The cancel's second step, after the job failed, changes nothing.
    job.cancel()
    #expect(reason(of: job) == TestError(2))
  }

  /// A nested job's `fail(_:)` cancels its task, which finishes on the same thread; the nested
  /// job finishes, and its `.failFast` parent, whose `main()` returned and which tracks nothing
  /// else, records its failing stop and finishes in the same drain, before that stop's actions
  /// run (they wait on the thread's stop trampoline). A cancel's first step recorded another
  /// reason before. The parent still reports its error as its reason.
  @Test func aFailFastJobThatFinishesBeforeItsStopsActionsRanReportsItsErrorAsItsReason() async {
    let deep = ManualTask("deep")
    let nested = TreeJob([deep])
    let job = TreeJob([nested])
    job.failurePolicy = .failFast
    job.startJob()
    #expect(await deep.startedLatch.waitOpen())
    #expect(await eventually { job.readJobState { $0.phase.hasMainReturned } })  // main() returned
    // cancel(reason:)'s first step:
    _ = job.state.withLock { $0.recordCancellationReason(TestError(1)) }
    nested.fail(TestError(2))
    await #expect(throws: TestError(2)) { try await job.run() }
    #expect(job.error as? TestError == TestError(2))
    #expect(reason(of: job) == TestError(2))
    #expect(reason(of: nested) == TestError(2))
  }

  @Test func aReasonIsHandedDownToEveryTaskAndNestedJobAndRunThrowsIt() async {
    let tree = Tree()
    let (job, nested, task, deep) = (tree.job, tree.nested, tree.task, tree.deep)
    await tree.start()
    job.cancel(reason: TestError(7))
    job.cancel(reason: TestError(8))  // the first reason wins
    await #expect(throws: TestError(7)) { try await job.run() }
    await #expect(throws: TestError(7)) { try await nested.waitForFinish() }
    for operation in [job, nested, task, deep] as [ConcurrentOperation] {
      #expect(reason(of: operation) == TestError(7))
    }
    #expect(job.error == nil)  // cancelled, not failed
  }

  @Test func failIsTheReasonItsTasksSee() async {
    let task = ManualTask("t")
    let job = TreeJob([task])
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    job.fail(TestError(2))
    await #expect(throws: TestError(2)) { try await job.run() }
    #expect(reason(of: job) == TestError(2))
    #expect(reason(of: task) == TestError(2))
  }

  @Test func aFailFastSiblingsErrorIsTheReasonTheOthersSee() async {
    let failing = ManualTask("failing")
    let other = ManualTask("other")
    let deep = ManualTask("deep")
    let nested = TreeJob([deep])
    let job = TreeJob([failing, other, nested])
    job.failurePolicy = .failFast
    job.startJob()
    #expect(await failing.startedLatch.waitOpen())
    #expect(await deep.startedLatch.waitOpen())
    failing.finish(error: TestError(3))
    await #expect(throws: TestError(3)) { try await job.run() }
    #expect(reason(of: other) == TestError(3))
    #expect(reason(of: nested) == TestError(3))
    #expect(reason(of: deep) == TestError(3))
  }

  @Test func aTaskTrackedWhileTheJobStopsGetsTheReason() async {
    let late = ManualTask("late")
    let gate = ManualTask("gate")
    let job = ScriptedJob { job in
      job.trackAndQueue(gate) { _ in job.trackAndQueue(late) }
    }
    job.startJob()
    #expect(await gate.startedLatch.waitOpen())
    job.cancel(reason: TestError(5))
    await #expect(throws: TestError(5)) { try await job.run() }
    // The gate's callback is skipped once the job stops; a task tracked from outside meanwhile:
    let outside = ManualTask("outside")
    let stopping = TreeJob([ManualTask("held", finishesOnCancel: false)])
    stopping.startJob()
    let held = stopping.tasks[0] as! ManualTask
    #expect(await held.startedLatch.waitOpen())
    stopping.cancel(reason: TestError(6))
    stopping.trackAndQueue(outside)
    held.finish()
    await #expect(throws: TestError(6)) { try await stopping.run() }
    #expect(reason(of: outside) == TestError(6))
    #expect(!outside.didStart)
  }

  @Test func theTaskFinishedEventCarriesTheReason() async throws {
    let task = ManualTask("t")
    let job = TreeJob([task])
    let events = job.events
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    job.cancel(reason: TestError(9))
    var finishedErrors: [TestError?] = []
    for await event in events {
      if case .taskFinished(_, _, _, let error, _) = event { finishedErrors.append(error as? TestError) }
    }
    #expect(finishedErrors == [TestError(9)])
  }

  /// A job stopped with a reason (its own `cancel(reason:)`, or its parent's time limit or
  /// `.failFast` failure handed down) carries it in its own `finished` event; a plain cancel
  /// carries none. Its `error` stays `nil`.
  @Test(arguments: ["plain", "reason", "limit", "failFast"])
  func aStoppedJobsFinishedEventCarriesItsReason(stop: String) async {
    let tree = Tree(limit: stop == "limit" ? .seconds(1) : nil)
    let nested = tree.nested
    if stop == "failFast" { tree.job.failurePolicy = .failFast }
    let events = nested.events
    await tree.start()
    switch stop {
    case "plain": nested.cancel()
    case "reason": nested.cancel(reason: TestError(9))
    case "limit": tree.clock.advance(by: .seconds(1))
    default: tree.task.finish(error: TestError(3))
    }
    var finished: [(any Error)?] = []
    for await event in events {
      if case .finished(let error, _) = event { finished.append(error) }
    }
    #expect(finished.count == 1)
    let error = finished.first ?? nil
    switch stop {
    case "plain": #expect(error == nil)
    case "reason": #expect(error as? TestError == TestError(9))
    case "limit": #expect(error as? JobKitError == JobKitError(.timeLimitExceeded))
    default: #expect(error as? TestError == TestError(3))
    }
    if stop != "limit" { #expect(nested.error == nil) }
    tree.job.cancel()
    _ = try? await tree.job.run()
  }

  // MARK: Time limits

  @Test func aJobOutOfTimeFailsAndEverythingBelowSeesTheReason() async {
    let tree = Tree(limit: .seconds(2), nestedLimit: .seconds(10))
    let (clock, job, nested, task, deep) = (tree.clock, tree.job, tree.nested, tree.task, tree.deep)
    await tree.start()
    clock.advance(by: .milliseconds(1999))
    #expect(!task.isCancelled && !deep.isCancelled)
    clock.advance(by: .milliseconds(1))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await job.run() }
    #expect(job.error as? JobKitError == JobKitError(.timeLimitExceeded))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await nested.waitForFinish() }
    for operation in [job, nested, task, deep] as [ConcurrentOperation] {
      #expect(operation.cancellationReason as? JobKitError == JobKitError(.timeLimitExceeded))
    }
    // The finished jobs' timers are gone: nothing fires later.
    #expect(await eventually { clock.pendingCount == 0 })
  }

  @Test func aNestedJobWithTheSmallerLimitFailsFirstAndItsParentGoesOn() async throws {
    let tree = Tree(limit: .seconds(5), nestedLimit: .seconds(1))
    let (clock, job, nested, task) = (tree.clock, tree.job, tree.nested, tree.task)
    await tree.start()
    clock.advance(by: .seconds(1))
    await #expect(throws: JobKitError(.timeLimitExceeded)) { try await nested.waitForFinish() }
    #expect(!task.isCancelled)
    task.finish()
    try await job.run()  // the nested job's failure is routed under `.ignore`
    #expect(job.cancellationReason == nil)
    #expect(job.failures.count == 1)
  }

  @Test func aJobFinishingInTimeDisarmsItsLimit() async throws {
    let clock = ManualClock()
    let job = TreeJob([InstantTask("quick")])
    job.clock = clock
    job.timeLimit = .seconds(1)
    try await job.run()
    #expect(await eventually { clock.pendingCount == 0 })
    clock.advance(by: .seconds(2))
    #expect(job.error == nil && job.cancellationReason == nil)
  }

  @Test func aLimitSetAfterTheStartOrNegativeIsReportedAndIgnored() async throws {
    let task = ManualTask("t")
    let job = TreeJob([task])
    job.timeLimit = .seconds(-1)
    #expect(job.timeLimit == nil)
    job.startJob()
    #expect(await task.startedLatch.waitOpen())
    job.timeLimit = .seconds(1)
    #expect(job.timeLimit == nil)
    #expect(job.misuses.filter { $0 == JobKitError(.invalidLimit) }.count == 2)
    task.finish()
    try await job.run()
  }
}
