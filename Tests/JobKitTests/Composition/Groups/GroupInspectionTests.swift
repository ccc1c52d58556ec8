import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Inspecting a group and a command queue: MGCommand's `MGCommandGroupSpec` and
/// `MGSequentialCommandGroupSpec` cases on `commands` ("should have N commands after adding"),
/// `count`, and `activeCommands` ("should have the executing commands active", "should remove
/// the command once completed"), for ``GroupJob/tasks``, ``GroupJob/taskCount``,
/// ``GroupJob/runningTasks`` and ``CommandQueue``'s `commands`, `commandCount`,
/// `runningCommands`.
@Suite("Groups and CommandQueue: inspection (MGCommand commands, count, activeCommands)", .timeLimit(.minutes(1)))
struct GroupInspectionTests {
  private func labels(_ tasks: [Operation]) -> [String] {
    tasks.map { ($0 as? TestTask)?.label ?? "?" }
  }

  // MGCommandGroupSpec: "should have 3 commands after adding", then the active ones while
  // executing, and a completed command removed.
  @Test func aConcurrentGroupListsItsTasksAndTheRunningOnes() async throws {
    let tasks = ["a", "b", "c"].map { TestTask($0) }
    let group = ConcurrentGroup(tasks)
    #expect(labels(group.tasks) == ["a", "b", "c"])
    #expect(group.taskCount == 3)
    #expect(group.runningTasks.isEmpty)

    group.startJob()
    for task in tasks { #expect(await task.startedLatch.waitOpen()) }
    #expect(labels(group.tasks) == ["a", "b", "c"])
    #expect(labels(group.runningTasks) == ["a", "b", "c"])

    tasks[1].finish()
    #expect(await eventually { self.labels(group.tasks) == ["a", "c"] })
    #expect(labels(group.runningTasks) == ["a", "c"])
    #expect(group.taskCount == 2)

    let late = TestTask("d")
    group.add(late)
    #expect(await late.startedLatch.waitOpen())
    #expect(labels(group.tasks) == ["a", "c", "d"])

    for task in [tasks[0], tasks[2], late] { task.finish() }
    try await group.run()
    #expect(group.tasks.isEmpty)
    #expect(group.taskCount == 0)
    #expect(group.runningTasks.isEmpty)
  }

  // MGSequentialCommandGroupSpec: one active command at a time; the others wait, in order.
  @Test func aSequentialGroupListsTheRunningTaskThenTheWaitingOnes() async throws {
    let tasks = ["a", "b", "c"].map { TestTask($0) }
    let group = SequentialGroup(tasks)
    group.startJob()
    #expect(await tasks[0].startedLatch.waitOpen())
    #expect(labels(group.tasks) == ["a", "b", "c"])
    #expect(labels(group.runningTasks) == ["a"])
    #expect(group.taskCount == 3)

    tasks[0].finish()
    #expect(await tasks[1].startedLatch.waitOpen())
    #expect(await eventually { self.labels(group.tasks) == ["b", "c"] })
    #expect(labels(group.runningTasks) == ["b"])

    tasks[1].finish()
    #expect(await tasks[2].startedLatch.waitOpen())
    tasks[2].finish()
    try await group.run()
    #expect(group.tasks.isEmpty)
  }

  // MGCommandGroupSpec, cancel: "the remaining commands get removed".
  @Test func aCancelledGroupDropsItsWaitingTasks() async throws {
    let tasks = ["a", "b", "c"].map { TestTask($0) }
    let group = SequentialGroup(tasks)
    group.startJob()
    #expect(await tasks[0].startedLatch.waitOpen())
    group.cancel()
    await #expect(throws: CancellationError.self) { try await group.run() }
    #expect(group.tasks.isEmpty)
    #expect(!tasks[1].didStart && !tasks[2].didStart)
  }

  // MGCommandGroupSpec with `autoStartGroup`: the auto-start group's `commands`, `count` and
  // `activeCommands`.
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func aCommandQueueListsItsCommandsAndTheRunningOnes(mode: CommandQueue.Mode) async throws {
    let queue = CommandQueue(mode: mode)
    #expect(queue.commands.isEmpty && queue.commandCount == 0 && queue.runningCommands.isEmpty)
    let tasks = ["a", "b"].map { TestTask($0) }
    for task in tasks { queue.add(task) }
    #expect(await tasks[0].startedLatch.waitOpen())
    if mode == .concurrent {
      #expect(await tasks[1].startedLatch.waitOpen())
    }
    #expect(labels(queue.commands) == ["a", "b"])
    #expect(queue.commandCount == 2)
    #expect(labels(queue.runningCommands) == (mode == .sequential ? ["a"] : ["a", "b"]))

    tasks[0].finish()
    #expect(await tasks[1].startedLatch.waitOpen())
    #expect(await eventually { self.labels(queue.commands) == ["b"] })
    #expect(labels(queue.runningCommands) == ["b"])

    tasks[1].finish()
    await queue.drained()
    #expect(queue.commands.isEmpty && queue.commandCount == 0 && queue.runningCommands.isEmpty)
  }

  @Test func aPausedCommandQueueListsTheWaitingCommandsAsNotRunning() async throws {
    let queue = CommandQueue(mode: .concurrent)
    queue.pause()
    let task = TestTask("waits")
    queue.add(task)
    #expect(labels(queue.commands) == ["waits"])
    #expect(queue.runningCommands.isEmpty)
    queue.resume()
    #expect(await task.startedLatch.waitOpen())
    #expect(labels(queue.runningCommands) == ["waits"])
    task.finish()
    await queue.drained()
    #expect(queue.commands.isEmpty)
  }

  /// Stress. Invariants of every snapshot taken on another thread while 2,000 tasks (finishing
  /// inline or later, chosen by a seeded generator; a quarter added while the group runs) go
  /// through the group: no task listed twice, every running task is listed, only the group's
  /// tasks appear, a sequential group runs at most one; at the end nothing is held and every
  /// task ran exactly once.
  @Test(arguments: GroupKind.allCases)
  func snapshotsTakenWhileTheGroupRunsAreConsistent(kind: GroupKind) async throws {
    let log = EventLog()
    var generator = SeededGenerator(seed: 20)
    // The first step runs until the last 500 were added: the group cannot finish before (a task
    // added after the finish would be rejected, and its own tasks can all finish meanwhile).
    let addedAll = Latch()
    let holdUntilAdded: @Sendable () -> Void = { _ = addedAll.wait(timeout: 60) }
    let steps = (0..<2_000).map { index in
      Step(
        "\(index)", log: log, finish: Bool.random(using: &generator) ? .inline : .later,
        body: index == 0 ? holdUntilAdded : nil)
    }
    let group = kind.make(Array(steps[..<1_500]))
    let members = Set(steps.map(ObjectIdentifier.init))
    let violations = Locked<[String]>([])
    let snapshots = Locked(0)
    let stop = Latch()
    let inspected = Latch()
    Thread {
      while !stop.wait(timeout: 0) {
        let tasks = group.tasks
        let running = group.runningTasks
        let ids = tasks.map(ObjectIdentifier.init)
        var problems: [String] = []
        if Set(ids).count != ids.count { problems.append("a task listed twice") }
        if !Set(ids).isSubset(of: members) { problems.append("a task that is not the group's") }
        if !Set(running.map(ObjectIdentifier.init)).isSubset(of: members) {
          problems.append("a running task that is not the group's")
        }
        if kind == .sequential && running.count > 1 { problems.append("\(running.count) running") }
        if !problems.isEmpty { violations.mutate { $0 += problems } }
        snapshots.mutate { $0 += 1 }
      }
      inspected.open()
    }.start()
    group.startJob()
    for step in steps[1_500...] { group.add(step) }
    addedAll.open()
    try await group.run()
    stop.open()
    #expect(await inspected.waitOpen(timeout: 30))
    #expect(violations.value.isEmpty)
    #expect(snapshots.value > 0)
    #expect(group.tasks.isEmpty && group.runningTasks.isEmpty)
    let ran = log.all
    #expect(ran.count == 2_000 && Set(ran).count == 2_000)
    #expect(group.misuses.isEmpty)
  }
}
