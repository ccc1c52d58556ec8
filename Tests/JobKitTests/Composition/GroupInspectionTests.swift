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
}
