import Foundation
import JobKitTesting
import Testing

@testable import JobKit

extension JobEvent {
  /// A compact name for order checks.
  var label: String {
    switch self {
    case .started: return "started"
    case .taskTracked(let task, _, _): return "tracked \(task)"
    case .taskStarted(let task, _, _): return "started \(task)"
    case .taskFinished(let task, _, _, let error, _): return error == nil ? "finished \(task)" : "failed \(task)"
    case .groupFinished(let group, _): return "group \(group)"
    case .allTasksFinished: return "all"
    case .finished(let error, _): return error == nil ? "finished" : "job failed"
    }
  }
}

func named<T: Operation>(_ task: T, _ name: String) -> T {
  task.name = name
  return task
}

@Suite("JobController events, progress and debug description")
struct JobControllerObservationTests {
  @Test func eventsFollowTheLifecycleInOrderAndEndWithTheJob() async throws {
    let job = ScriptedJob { job in
      job.trackAndQueue(named(InstantTask(), "a")) { _ in
        job.trackAndQueue(named(InstantTask(failure: TestError(1)), "b"))
      }
    }
    let events = job.events
    job.startJob()
    var received: [JobEvent] = []
    for await event in events { received.append(event) }
    #expect(
      received.map(\.label) == [
        "started", "tracked a", "started a", "finished a", "tracked b", "started b", "failed b",
        "group InstantTask", "all", "finished",
      ])
    let stamps = received.map(\.timestamp)
    #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 <= $1 })
    for case .taskFinished(_, _, let duration, _, _) in received {
      #expect(duration >= .zero)
    }
  }

  @Test func severalListenersEachGetEveryEventAndALateOneEndsAtOnce() async throws {
    let job = ScriptedJob { job in
      for index in 0..<20 { job.trackAndQueue(named(InstantTask(), "\(index)")) }
    }
    let first = job.events
    let second = job.events
    job.startJob()
    async let firstLabels = first.reduce(into: [String]()) { $0.append($1.label) }
    async let secondLabels = second.reduce(into: [String]()) { $0.append($1.label) }
    let (one, two) = await (firstLabels, secondLabels)
    #expect(one == two)
    // started, 3 per task, all, finished; plus one `group` event each time the group's count
    // reached zero (tasks that finish while `main()` still tracks can empty it several times).
    let groupEvents = one.filter { $0.hasPrefix("group ") }.count
    #expect(one.count - groupEvents == 63)
    #expect(groupEvents >= 1 && one.last(where: { $0.hasPrefix("group ") || $0 == "all" }) == "all")
    var late = 0
    for await _ in job.events { late += 1 }
    #expect(late == 0)
  }

  /// Two jobs whose events are listened to track one operation: each gets its `taskStarted`
  /// (the second job's start observer used to replace the first's, whose stream then had none).
  @Test func twoJobsSharingATaskEachReportItsStart() async throws {
    let shared = named(TestTask(), "shared")
    let tracked = (Latch(), Latch())
    let first = ScriptedJob { job in
      job.track(shared)
      tracked.0.open()
    }
    let second = ScriptedJob { job in
      job.track(shared)
      tracked.1.open()
    }
    let firstEvents = first.events
    let secondEvents = second.events
    first.startJob()
    second.startJob()
    #expect(await tracked.0.waitOpen(timeout: 30))
    #expect(await tracked.1.waitOpen(timeout: 30))
    OperationQueue().addOperation(shared)
    #expect(shared.waitUntilStarted())
    shared.finish()
    async let firstLabels = firstEvents.reduce(into: [String]()) { $0.append($1.label) }
    async let secondLabels = secondEvents.reduce(into: [String]()) { $0.append($1.label) }
    let (one, two) = await (firstLabels, secondLabels)
    for labels in [one, two] {
      #expect(labels.filter { $0 == "started shared" }.count == 1, "\(labels)")
      let started = labels.firstIndex(of: "started shared") ?? labels.count
      #expect(started < (labels.firstIndex(of: "finished shared") ?? -1), "\(labels)")
    }
  }

  @Test func aJobNobodyListensToKeepsNoEventState() async throws {
    let job = ScriptedJob { job in
      for _ in 0..<100 { job.trackAndQueue(InstantTask()) }
    }
    try await job.run()
    #expect(job.readJobState { $0.listeners.isEmpty })
  }

  @Test func progressGrowsWithTaskNodesAndCountsRoutedOnes() async throws {
    let seen = Locked<[(total: Int64, completed: Int64)]>([])
    let job = ScriptedJob { job in
      let progress = job.progress
      job.trackAndQueue(InstantTask()) { _ in
        seen.mutate { $0.append((progress.totalUnitCount, progress.completedUnitCount)) }
        job.trackAndQueue(InstantTask())
        job.trackAndQueue(InstantTask())
        seen.mutate { $0.append((progress.totalUnitCount, progress.completedUnitCount)) }
      }
    }
    try await job.run()
    #expect(seen.value.map(\.total) == [1, 3])
    #expect(seen.value.map(\.completed) == [0, 0])  // the first is counted once its callback returned
    #expect(job.progress.completedUnitCount == 3 && job.progress.totalUnitCount == 3)
    #expect(job.fractionCompleted == 1)
  }

  @Test func aNestedJobsProgressIsAChildOfItsParents() async throws {
    let first = ManualTask("first")
    // Unfinished until the gate opens, in a group of its own, without blocking a queue's thread.
    let gate = Gate()
    let second = GatedCommand("second", gate: gate, object: FlagAndString())
    let inner = ScriptedJob { job in
      job.trackAndQueue(first)
      job.trackAndQueue(second)
    }
    let outer = ScriptedJob { $0.trackAndQueue(inner) }
    _ = outer.progress
    let innerEvents = inner.events
    outer.startJob()
    #expect(await first.startedLatch.waitOpen())
    first.finish()
    // The inner job emits `groupFinished(TestTask)` right after it counted `first` as done.
    for await event in innerEvents {
      if case .groupFinished(let group, _) = event, group == "TestTask" { break }
    }
    #expect(abs(inner.fractionCompleted - 0.5) < 0.001)
    #expect(abs(outer.fractionCompleted - 0.5) < 0.001)  // its only unit is the inner job, half done
    gate.open()
    try await outer.run()
    #expect(outer.fractionCompleted == 1)
    #expect(inner.progress.completedUnitCount == inner.progress.totalUnitCount)
  }

  @Test func progressReadAfterAnEmptyJobFinishedIsComplete() async throws {
    let job = ScriptedJob { _ in }
    try await job.run()
    #expect(job.progress.totalUnitCount == 1 && job.progress.completedUnitCount == 1)
    #expect(job.fractionCompleted == 1)
  }

  @Test func debugDescriptionShowsStateGroupsLimitsFailuresAndProgress() async throws {
    let blocker = ManualTask("blocker")
    let waiting = ManualTask("waiting")
    let tracked = Latch()
    let job = ScriptedJob { job in
      job.setMaxConcurrentTasks(1, forGroup: ManualTask.self)
      job.trackAndQueue(InstantTask(failure: TestError(4)))
      job.trackAndQueue(blocker)
      job.trackAndQueue(waiting)
      tracked.open()
    }
    _ = job.progress
    job.startJob()
    #expect(await blocker.startedLatch.waitOpen())
    // `blocker` can start before `main()` tracked `waiting`.
    #expect(await tracked.waitOpen())
    let text = job.debugDescription
    #expect(text.contains("ScriptedJob"))
    #expect(text.contains("TestTask: 2 unfinished, limit 1 (1 running, 1 waiting)"))
    #expect(text.contains("failures (1)") || text.contains("unfinished"))
    #expect(text.contains("progress:"))
    blocker.finish()
    #expect(await waiting.startedLatch.waitOpen())
    waiting.finish()
    try await job.run()
    let done = job.debugDescription
    #expect(done.contains("finished"))
    #expect(done.contains("failures (1)"))
    #expect(done.contains("3 of 3 tracked task(s) routed, 100% complete"))
  }
}
