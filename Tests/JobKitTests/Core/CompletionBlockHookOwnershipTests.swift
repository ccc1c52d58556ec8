import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A job with no `main()` work that counts its routed tasks.
private final class TallyJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `routed` is a lock-protected counter.
  let routed = Locked(0)
  override func taskFinished(_ task: Operation) { routed.mutate { $0 += 1 } }
}

/// Issue 19: a completion-block hook's state belongs to the job that installed it. A finishing
/// plain task takes no lock of the hook table: its owner's job lock marks the hook fired, and
/// the fired (stale) hook stays in the table until its owner removes it, by batches and when it
/// finishes.
@Suite("Completion block hook: a hook belongs to the job that installed it")
struct CompletionBlockHookOwnershipTests {
  /// A fired hook left in the table counts as absent: the next job tracking its operation
  /// installs a hook of its own (joining the fired one, it would never be signalled).
  @Test func aFiredHookIsReplacedByTheNextTrackerOfItsOperation() async throws {
    let operation = BlockOperation {}
    operation.start()
    QuietMisuse.silence(operation)
    let owner = TallyJob()
    let next = TallyJob()
    // Finished: the hook is registered and fires at once, on this thread; it stays in the table.
    owner.track(operation)
    #expect(CompletionBlockHook.count(ownedBy: owner) == 1)
    next.track(operation)
    try #require(CompletionBlockHook.count(ownedBy: next) == 1)
    #expect(CompletionBlockHook.count(ownedBy: owner) == 0)
    for job in [owner, next] {
      job.startJob()
      #expect(await job.finishedSoon())
      #expect(job.routed.value == 1)
      #expect(job.misuses.map(\.code) == [.taskAlreadyFinished])
      #expect(CompletionBlockHook.count(ownedBy: job) == 0)
    }
  }

  /// Jobs that join a hook while its owner's task finishes (Foundation runs the wrapper on a
  /// global queue while the joiners track the same operations, in seeded random orders): each
  /// job routes each operation exactly once, each own block runs once, and no job leaves a hook
  /// in the table. `JOBKIT_HOOK_STRESS_ROUNDS` sets the rounds (default 20).
  @Test func joinersRacingTheOwnersFireAreSignalledOnce() async throws {
    var generator = SeededGenerator(seed: 19)
    for _ in 0..<SharedPlainOperations.stressRounds {
      let count = Int.random(in: 50...300, using: &generator)
      let (operations, ownRuns) = SharedPlainOperations.make(count)
      // Tracking an operation that already finished is reported (and routed at once).
      QuietMisuse.silence(operations)
      let owner = TallyJob()
      let joiners = [TallyJob(), TallyJob()]
      for operation in operations {
        owner.track(operation)
      }
      let finishOrder = operations.shuffled(using: &generator)
      let joinOrder = operations.shuffled(using: &generator)
      await concurrently(2, barrier: true) { index in
        if index == 0 {
          for operation in finishOrder { operation.start() }
        } else {
          for operation in joinOrder {
            for joiner in joiners { joiner.track(operation) }
          }
        }
      }
      for job in [owner] + joiners {
        job.startJob()
        try #require(await job.finishedSoon())
        #expect(job.routed.value == count)
        #expect(CompletionBlockHook.count(ownedBy: job) == 0)
      }
      #expect(await eventually { ownRuns.value.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? 1 : 0) } })
    }
  }

  /// Fired hooks leave the table by batches while the job runs, and every one when it finishes.
  @Test(arguments: [10, CompletionBlockHook.retiredBatch * 2 + 10])
  func aJobLeavesNoHookInTheTable(tasks count: Int) async throws {
    let operations = (0..<count).map { _ in BlockOperation {} }
    let job = ScriptedJob { job in
      // Held open until every task was routed, so the batches are seen before the finish.
      _ = job.holdOpen()
      for operation in operations { job.trackAndQueue(operation) }
    }
    job.startJob()
    #expect(await eventually { job.log.all.filter { $0 == "taskFinished" }.count == count })
    #expect(await eventually { CompletionBlockHook.count(ownedBy: job) == count % CompletionBlockHook.retiredBatch })
    job.releaseHold()
    #expect(await job.finishedSoon())
    #expect(CompletionBlockHook.count(ownedBy: job) == 0)
  }

  /// The table, the job's retired hooks and the wrappers Foundation ran keep no finished job
  /// alive, while the user keeps its operations (with and without their own blocks).
  @Test func aFinishedJobIsReleasedWhileTheUserKeepsItsOperations() async throws {
    let operations = (0..<(CompletionBlockHook.retiredBatch + 10)).map { index in
      let operation = BlockOperation {}
      if index % 2 == 0 { operation.completionBlock = {} }
      return operation
    }
    var job: ScriptedJob? = ScriptedJob { job in
      for operation in operations { job.trackAndQueue(operation) { _ in } }
    }
    let reference = WeakRef(job!, "job")
    try await job!.run()
    job = nil
    #expect(await eventually { reference.object == nil })
    withExtendedLifetime(operations) {}
  }

  /// An operation's own block and a task's completion closure, held by hooks until their
  /// removal, are released after JobKit's locks: each probe calls back into the job and into
  /// every stripe of the hook table.
  @Test(arguments: [1, CompletionBlockHook.retiredBatch + 1])
  func whatRetiredHooksHoldIsReleasedOutsideTheLocks(tasks count: Int) async throws {
    let bystander = TallyJob()
    let latches = Locked<[Latch]>([])
    let job = ScriptedJob { job in
      for _ in 0..<count {
        let own = ReleaseProbe { [weak job] in
          _ = job?.failures
          _ = CompletionBlockHook.count(ownedBy: bystander)
        }
        let completion = ReleaseProbe { [weak job] in
          _ = job?.failures
          _ = CompletionBlockHook.count(ownedBy: bystander)
        }
        latches.mutate { $0 += [own.released, completion.released] }
        let operation = BlockOperation {}
        operation.completionBlock = { withExtendedLifetime(own) {} }
        job.trackAndQueue(operation) { _ in withExtendedLifetime(completion) {} }
      }
    }
    job.startJob()
    #expect(await job.finishedSoon())
    let all = latches.value
    #expect(all.count == 2 * count)
    // Under a lock, a release would deadlock its thread: its latch would never open.
    #expect(await eventually { all.allSatisfy(\.opened) })
  }
}
