import Foundation
import JobKit
import JobKitTesting
import Testing

/// An event type for the stress test; the tag makes `StressEvent<A>` and `StressEvent<B>` two
/// distinct event types.
struct StressEvent<Tag>: Sendable {
  let thread: Int
}

enum StressTagA {}
enum StressTagB {}

@Suite("CommandMap stress")
struct CommandMapStressTests {
  /// One mapping the stress test made, with the number of times its command actually ran.
  private struct Made: Sendable {
    let mapping: CommandMapping
    let runs: Locked<Int>
  }

  /// Invariants, with 8 threads mapping, unmapping, loading/unloading an extension and
  /// dispatching 10,000 events in total (seeded):
  /// - nothing crashes and every dispatched job finishes, without an error;
  /// - every mapping's command ran exactly as often as dispatch reports list it in `ran`;
  /// - a `once` mapping ran at most once, and is no longer mapped if it ran;
  /// - every command run is accounted for by exactly one report.
  @Test(arguments: [1 as UInt64, 2])
  func eightThreadsMapUnmapAndDispatch(seed: UInt64) async throws {
    let threads = 8
    let dispatchesPerThread = 10_000 / threads
    let map = CommandMap()
    let made = Locked<[Made]>([])
    let jobs = Locked<[CommandDispatch]>([])

    await concurrently(threads) { thread in
      var random = SeededGenerator(seed: seed &* 1000 &+ UInt64(thread))
      var live: [Made] = []
      var threadJobs: [CommandDispatch] = []
      threadJobs.reserveCapacity(dispatchesPerThread)
      let ownExtension = TestExtension { mapper in
        mapper.map(StressEvent<StressTagA>.self, priority: 2) { _ in }
      }
      for step in 0..<dispatchesPerThread {
        let roll = Int.random(in: 0..<10, using: &random)
        if roll < 2 && live.count < 3 {
          let runs = Locked(0)
          let once = Bool.random(using: &random)
          let priority = Int.random(in: 0..<4, using: &random)
          let mapping: CommandMapping
          switch (Bool.random(using: &random), Bool.random(using: &random)) {
          case (true, true):
            mapping = map.map(StressEvent<StressTagA>.self, priority: priority, once: once) { _ in
              ClosureCommand { runs.mutate { $0 += 1 } }
            }
          case (true, false):
            mapping = map.map(StressEvent<StressTagA>.self, priority: priority, once: once) { _ in
              runs.mutate { $0 += 1 }
            }
          case (false, true):
            mapping = map.map(
              StressEvent<StressTagB>.self, priority: priority, once: once, guards: [{ $0.thread % 2 == 0 }]
            ) { _ in ClosureCommand { runs.mutate { $0 += 1 } } }
          case (false, false):
            mapping = map.map(StressEvent<StressTagB>.self, priority: priority, once: once) { _ in
              runs.mutate { $0 += 1 }
            }
          }
          let entry = Made(mapping: mapping, runs: runs)
          live.append(entry)
          made.mutate { $0.append(entry) }
        } else if roll < 3 && !live.isEmpty {
          map.unmap(live.remove(at: Int.random(in: 0..<live.count, using: &random)).mapping)
        }
        if step % 200 == 0 { map.load(ownExtension) }
        if step % 200 == 100 { map.unload(ownExtension) }
        if Bool.random(using: &random) {
          threadJobs.append(map.dispatch(StressEvent<StressTagA>(thread: thread)))
        } else {
          threadJobs.append(map.dispatch(StressEvent<StressTagB>(thread: thread)))
        }
      }
      jobs.mutate { $0.append(contentsOf: threadJobs) }
    }

    let allJobs = jobs.value
    #expect(allJobs.count == 10_000)
    for job in allJobs {
      try await job.waitForFinish()
    }
    #expect(allJobs.allSatisfy { $0.isFinished && $0.error == nil })

    var listed: [CommandMapping: Int] = [:]
    for job in allJobs {
      for mapping in job.ran { listed[mapping, default: 0] += 1 }
      #expect(job.commands.count == job.ran.count)
    }
    let mappedA = Set(map.mappings(for: StressEvent<StressTagA>.self))
    let mappedB = Set(map.mappings(for: StressEvent<StressTagB>.self))
    var totalRuns = 0
    for entry in made.value {
      let runs = entry.runs.value
      totalRuns += runs
      #expect(runs == listed[entry.mapping, default: 0])
      if entry.mapping.runsOnce {
        #expect(runs <= 1)
        if runs == 1 {
          #expect(!mappedA.contains(entry.mapping) && !mappedB.contains(entry.mapping))
        }
      }
    }
    let madeMappings = Set(made.value.map(\.mapping))
    let extensionRuns = listed.filter { !madeMappings.contains($0.key) }.values.reduce(0, +)
    #expect(totalRuns + extensionRuns == allJobs.map(\.ran.count).reduce(0, +))
    #expect(totalRuns > 0)
  }
}
