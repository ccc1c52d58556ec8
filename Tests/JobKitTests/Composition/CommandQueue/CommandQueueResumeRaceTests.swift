import Foundation
import JobKit
import JobKitTesting
import Testing

/// Found by the composition model (issue 23, seed 2771, no storm at all): commands added to a
/// sequential `CommandQueue` while a `resume()` from another thread races the adds can be
/// cancelled without running although nobody called `cancelAll()`, and `drained()` returns before
/// they finished. The cause: the burst's router decided to call `allTasksFinished()`, the resume
/// then took its job hold and started command 0 before the call, and the group closed with
/// command 0 running and 1 and 2 still waiting. A group now closes only once every task it
/// started was routed (see `GroupStateAddStopTests`).
@Suite("CommandQueue resume racing adds")
struct CommandQueueResumeRaceTests {
  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func commandsAddedWhileAResumeRacesAllRun(mode: CommandQueue.Mode) async {
    var lost: [String] = []
    for round in 0..<3_000 {
      let queue = CommandQueue(mode: mode)
      let ran = ModelLocked([Int: Int]())
      let commands = (0..<3).map { index in
        BlockTask { ran.withLock { $0[index, default: 0] += 1 } }
      }
      queue.pause()
      queue.add(commands[0])
      DispatchQueue.global().async { queue.resume() }
      queue.add(commands[1])
      queue.add(commands[2])
      await queue.drained()
      let unfinished = commands.indices.filter { !commands[$0].isFinished }
      let runs = ran.withLock { $0 }
      let notRun = commands.indices.filter { runs[$0] != 1 }
      if !unfinished.isEmpty || !notRun.isEmpty {
        let cancelled = commands.indices.filter { commands[$0].isCancelled }
        lost.append(
          "round \(round): unfinished after drained() \(unfinished), not run \(notRun), cancelled \(cancelled)")
      }
      if lost.count >= 3 { break }
    }
    #expect(lost.isEmpty, "\(lost)")
  }
}
