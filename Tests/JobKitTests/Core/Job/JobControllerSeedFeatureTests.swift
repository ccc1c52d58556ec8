import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A DHJobController-style job that queues its task itself.
final class SelfQueueingJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let someQueue: OperationQueue
  let routed: Locked<[String]>
  init(_ someQueue: OperationQueue, _ routed: Locked<[String]>) {
    self.someQueue = someQueue
    self.routed = routed
    super.init()
  }
  override func main() {
    let task = InstantTask("mine")
    task.name = "mine"
    track(task)
    someQueue.addOperation(task)
  }
  override func taskFinished(_ task: Operation) { routed.mutate { $0.append("task \(task.name ?? "?")") } }
  override func taskGroupFinished(_ group: Operation.Type) { routed.mutate { $0.append("group \(group)") } }
  override func allTasksFinished() { routed.mutate { $0.append("all") } }
}

/// DHJobController's `trackTask:` (the caller queues the task) on the normal path.
@Suite("JobController: plain track")
struct JobControllerSeedFeatureTests {
  @Test func aTaskTrackedWithTrackAndQueuedByTheCallerIsRoutedToTaskFinished() async throws {
    let someQueue = OperationQueue()
    let routed = Locked<[String]>([])
    let job = SelfQueueingJob(someQueue, routed)
    try await job.run()
    #expect(routed.value == ["task mine", "group InstantTask", "all"])
    #expect(job.misuses.isEmpty)
  }
}

/// CompositeOperations' configurable default queue. `JobController.defaultTaskQueue` is one
/// setting for the whole process: every job made while the test has it set, by any suite
/// running beside it, would take that queue instead of a private one of its own (and fail the
/// suites that check how a job starts its tasks), so it runs only when
/// `JOBKIT_GLOBAL_STATE_TESTS` is set; `.ci/run` runs it alone.
@Suite(
  "JobController: the default task queue (a process-wide setting)",
  .enabled(
    if: ProcessInfo.processInfo.environment["JOBKIT_GLOBAL_STATE_TESTS"] != nil, "set JOBKIT_GLOBAL_STATE_TESTS=1")
)
struct DefaultTaskQueueTests {
  @Test func jobsAndGroupsCreatedWithoutAQueueUseTheDefaultTaskQueue() async throws {
    let shared = OperationQueue()
    shared.name = "configured default"
    JobController.defaultTaskQueue = shared
    let group = SequentialGroup()
    let job = ScriptedJob { _ in }
    JobController.defaultTaskQueue = nil
    let own = ConcurrentGroup()
    #expect(group.taskQueue === shared)
    #expect(job.taskQueue === shared)
    #expect(own.taskQueue !== shared)
    #expect(SequentialGroup(taskQueue: OperationQueue()).taskQueue !== shared)
    let ranOn = Locked<String?>(nil)
    group.add(BlockTask { ranOn.mutate { $0 = OperationQueue.current?.name } })
    try await group.run()
    #expect(ranOn.value == "configured default")
  }
}
