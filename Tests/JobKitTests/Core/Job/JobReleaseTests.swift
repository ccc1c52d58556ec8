import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Every kind of job is freed once its user dropped it: never started (with tasks it tracked
/// waiting for its start), or started and finished; with or without a tracked task. The tracker
/// holds each object weakly and gives up after its time limit, so a leak fails the test.
@Suite("Jobs are freed when dropped")
struct JobReleaseTests {
  enum Kind: String, CaseIterable, CustomTestStringConvertible {
    case plain, concurrentGroup, sequentialGroup, pipeline, commandQueue, commandMapDispatch
    var testDescription: String { rawValue }
  }

  private struct Mapped: Sendable {}
  private struct Unmapped: Sendable {}

  /// Makes a job of `kind`, with a tracked task if `tracksTask`, runs it to its finish if
  /// `runs`, and drops it; the tracker watches the job and its task.
  private static func makeAndDrop(_ kind: Kind, runs: Bool, tracksTask: Bool, _ tracker: ReleaseTracker) async throws {
    let task = InstantTask("task")
    if tracksTask {
      tracker.watch(task, "task")
    }
    switch kind {
    case .plain:
      let job = ScriptedJob { job in
        if tracksTask, runs { job.trackAndQueue(task) }
      }
      tracker.watch(job, "job")
      if runs {
        try await job.run()
      } else if tracksTask {
        // Tracked before the start: the job queues it at once; it finishes, never routed.
        job.trackAndQueue(task)
        try await task.waitForFinish()
      }
    case .concurrentGroup, .sequentialGroup:
      let tasks: [Operation] = tracksTask ? [task] : []
      let group: GroupJob = kind == .concurrentGroup ? ConcurrentGroup(tasks) : SequentialGroup(tasks)
      tracker.watch(group, "group")
      if runs { try await group.run() }
    case .pipeline:
      let pipeline = Pipeline.start {
        if tracksTask {
          try await ScriptedJob { $0.trackAndQueue(task) }.run()
        }
        return 1
      }
      tracker.watch(pipeline, "pipeline")
      if runs { _ = try await pipeline.run() }
    case .commandQueue:
      // A queue starts a burst for its first command; paused, the burst holds its commands back
      // until a resume or a cancel, which lets them go without running.
      let queue = CommandQueue(mode: .sequential)
      tracker.watch(queue, "queue")
      if !runs { queue.pause() }
      if tracksTask { queue.add(task) }
      if !runs { queue.cancelAll() }
      await queue.drained()
    case .commandMapDispatch:
      let map = CommandMap()
      map.map(Mapped.self) { _ in task }
      tracker.watch(map, "map")
      let dispatch = tracksTask ? map.dispatch(Mapped()) : map.dispatch(Unmapped())
      tracker.watch(dispatch, "dispatch")
      // A dispatch starts at once: it is always awaited.
      try await dispatch.run()
    }
  }

  struct Shape: Sendable, CustomTestStringConvertible {
    let runs: Bool
    let tracksTask: Bool
    var testDescription: String { (runs ? "finished" : "never started") + (tracksTask ? ", with a task" : "") }
    static let all = [false, true].flatMap { runs in [false, true].map { Shape(runs: runs, tracksTask: $0) } }
  }

  @Test(arguments: Kind.allCases, Shape.all)
  func aDroppedJobIsFreed(kind: Kind, shape: Shape) async throws {
    let tracker = ReleaseTracker()
    try await Self.makeAndDrop(kind, runs: shape.runs, tracksTask: shape.tracksTask, tracker)
    #expect(await tracker.survivors() == [])
  }

  /// A job that was never started stays alive while a task it queued runs (its finish is
  /// recorded by the job), and is freed once that task finished.
  @Test func anUnstartedJobLivesUntilTheTaskItQueuedFinished() async throws {
    let tracker = ReleaseTracker()
    let task = ManualTask("running")
    do {
      let job = ScriptedJob { _ in }
      tracker.watch(job, "job")
      job.trackAndQueue(task)
    }
    #expect(await task.startedLatch.waitOpen())
    #expect(await tracker.survivors(waitingUpTo: .milliseconds(50)) == ["job"])
    task.finish()
    #expect(await tracker.survivors() == [])
  }

  /// A group cancelled before its start lets its waiting tasks go: it starts `inner`, which waits
  /// for the task it queued. The group, dropped then, stays alive until `inner` finished (its
  /// finish is recorded by the group, through a node that does not hold it), and is freed after.
  @Test func aGroupCancelledBeforeItsStartLivesUntilTheTasksItLetGoFinished() async throws {
    let tracker = ReleaseTracker()
    let slow = ManualTask("slow", finishesOnCancel: false)
    let inner = ScriptedJob { _ in }
    inner.trackAndQueue(slow)
    #expect(await slow.startedLatch.waitOpen())
    do {
      let group = ConcurrentGroup([inner])
      tracker.watch(group, "group")
      // Starts `inner` cancelled, on this thread: it waits for `slow`.
      group.cancel()
    }
    #expect(await tracker.survivors(waitingUpTo: .milliseconds(50)) == ["group"])
    slow.finish()
    #expect(await inner.finishedSoon())
    #expect(inner.isCancelled)
    #expect(await tracker.survivors() == [])
  }

  /// A plain operation in a group dropped before its start is freed with it; its finish hook must
  /// not stay behind for a new operation at the same address, which a new job tracks: that job's
  /// operations are observed (their blocks wrapped) and it finishes. Looped for address reuse.
  @Test func aPlainTaskOfADroppedGroupLeavesNoHookBehind() async throws {
    for round in 0..<300 {
      do {
        let group = ConcurrentGroup([BlockOperation {}, BlockOperation {}])
        _ = group
      }
      let job = ScriptedJob { job in
        for _ in 0..<4 {
          job.trackAndQueue(BlockOperation {})
        }
      }
      job.startJob()
      let finished = await job.finishedSoon(within: 10)
      #expect(finished, "round \(round)")
      guard finished else { return }
      #expect(job.log.all.filter { $0 == "taskFinished" }.count == 4)
    }
  }

  /// A `ConcurrentOperation` the user keeps after its group was dropped before its start is
  /// given to a new job: the dropped group's node no longer observes it nor holds its queueing,
  /// so the new job queues it and routes its finish.
  @Test func aTaskKeptFromADroppedGroupRunsInANewJob() async throws {
    for _ in 0..<50 {
      let tracker = ReleaseTracker()
      let task = InstantTask("kept")
      do {
        let group = ConcurrentGroup([task])
        tracker.watch(group, "group")
      }
      #expect(await tracker.survivors() == [])
      let job = ScriptedJob { $0.trackAndQueue(task) }
      job.startJob()
      let finished = await job.finishedSoon(within: 10)
      #expect(finished)
      guard finished else { return }
      #expect(task.isFinished)
      #expect(job.log.all == ["taskFinished", "group", "all"])
      #expect(task.misuses.isEmpty)
    }
  }

  /// The same with a plain operation: the new job wraps its block (the dropped group's hook is
  /// stale) and may queue it.
  @Test func aPlainTaskKeptFromADroppedGroupRunsInANewJob() async throws {
    let ran = Latch()
    let task = BlockOperation { ran.open() }
    do {
      _ = ConcurrentGroup([task])
    }
    let job = ScriptedJob { $0.trackAndQueue(task) }
    job.startJob()
    #expect(await job.finishedSoon(within: 10))
    #expect(await ran.waitOpen(timeout: 1))
    #expect(job.log.all == ["taskFinished", "group", "all"])
  }
}
