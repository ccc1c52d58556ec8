import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A `BlockOperation` that lets a test stop the thread that finishes it inside Foundation's
/// finish, after `isFinished` turned true and before Foundation takes its `completionBlock`
/// (corelibs reads `isFinished` there, then the block, the latter with no lock), and that records
/// every `completionBlock` write made while that thread is stopped.
final class PausedFinishOperation: BlockOperation, @unchecked Sendable {
  // @unchecked Sendable: the mutable state is in `Locked` boxes; the latches are thread-safe.
  /// When a job tracking the task lets it finish: as it reads the task's block, or once it wrote
  /// its wrapper.
  enum Moment: Sendable { case read, write }

  /// Opened by the block once it runs; the block then waits for `finish`.
  let running = Latch()
  private let finish = Latch()
  /// Opened once the finishing thread stopped in Foundation's finish; it waits for `resume`.
  let stopped = Latch()
  let resume = Latch()
  /// Once set, the next `completionBlock` read or write (as set) lets the task finish and waits
  /// until the finishing thread stopped.
  let finishOn = Locked<Moment?>(nil)
  /// `completionBlock` writes made while the finishing thread was stopped.
  let writesWhileStopped = Locked(0)
  private let finisher = Locked<Thread?>(nil)

  override init() {
    super.init()
    addExecutionBlock { [unowned self] in
      finisher.mutate { $0 = Thread.current }
      running.open()
      _ = finish.wait(timeout: 30)
    }
  }

  override var isFinished: Bool {
    let finished = super.isFinished
    if finished, finisher.value === Thread.current, !stopped.opened {
      stopped.open()
      _ = resume.wait(timeout: 30)
    }
    return finished
  }

  override var completionBlock: (@Sendable () -> Void)? {
    get {
      let block = super.completionBlock
      finishNow(on: .read)
      return block
    }
    set {
      if stopped.opened, !resume.opened {
        writesWhileStopped.mutate { $0 += 1 }
      }
      super.completionBlock = newValue
      finishNow(on: .write)
    }
  }

  private func finishNow(on moment: Moment) {
    let now = finishOn.mutate { armed -> Bool in
      guard armed == moment else { return false }
      armed = nil
      return true
    }
    if now {
      finish.open()
      _ = stopped.wait(timeout: 30)
    }
  }
}

/// A job with no `main()` work that counts its routed tasks.
private final class CountingJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: `routed` is a lock-protected counter.
  let routed = Locked(0)
  override func taskFinished(_ task: Operation) { routed.mutate { $0 += 1 } }
}

/// Adds `operations` to `queue` at once (`addOperations` is unavailable in async code).
private func enqueue(_ operations: [Operation], on queue: OperationQueue) {
  queue.addOperations(operations, waitUntilFinished: false)
}

@Suite("Completion block hook: plain operations finishing while jobs wrap their blocks")
struct CompletionBlockHookRaceTests {
  /// Corelibs Foundation reads a finishing operation's `completionBlock` storage with no lock
  /// (`Operation.observeValue`, after `isFinished` turned true), so a write there at that moment
  /// can tear that read or free the block Foundation is about to retain: the core model's long
  /// mode crashed in `swift_retain` under `Operation.observeValue` that way, when a job that had
  /// just wrapped a shared operation's block saw it finished and put the operation's own block
  /// back. Invariant: once a tracked plain operation is finishing, JobKit writes its
  /// `completionBlock` only from the wrapper Foundation runs; the task is still routed once and
  /// its own block runs once. The task finishes as the job reads its block (the wrapper must not
  /// be written) or once the job wrote the wrapper (the own block must not be put back).
  @Test(arguments: [PausedFinishOperation.Moment.read, .write], [false, true])
  func aTaskFinishingWhileItsBlockIsWrappedKeepsItsBlockUntilFoundationTookIt(
    finishingOn moment: PausedFinishOperation.Moment, ownBlock: Bool
  ) async throws {
    let task = PausedFinishOperation()
    let ownRuns = Locked(0)
    if ownBlock {
      task.completionBlock = { ownRuns.mutate { $0 += 1 } }
    }
    let job = CountingJob()
    QuietMisuse.silence(job)
    let finisher = Thread { task.start() }
    finisher.start()
    #expect(await task.running.waitOpen())
    task.finishOn.mutate { $0 = moment }
    // On a thread of its own: the job's read or write of the block waits there until the
    // finishing thread stopped.
    await onThread { job.track(task) }
    #expect(task.stopped.opened)
    #expect(task.writesWhileStopped.value == 0)
    task.resume.open()
    try await job.run()
    #expect(job.routed.value == 1)
    // Finished before the job wrote its wrapper: reported as finished when tracked.
    #expect(job.misuses.map(\.code) == (moment == .read ? [.taskAlreadyFinished] : []))
    #expect(await eventually { task.isFinished })
    if ownBlock {
      #expect(await eventually { ownRuns.value == 1 })
      #expect(ownRuns.value == 1)
    }
  }

  /// Stress, as the core model's shared-task shape: two jobs track the same plain operations at
  /// once (one with a completion closure, one without) while a side queue runs them, or before it
  /// does. Each job routes each operation exactly once and every operation's own block runs
  /// once. `JOBKIT_HOOK_STRESS_ROUNDS` sets the rounds (default 20).
  @Test(arguments: [true, false])
  func twoJobsTrackingSharedPlainOperationsWhileTheyRun(queueFirst: Bool) async throws {
    var generator = SeededGenerator(seed: queueFirst ? 1 : 2)
    for _ in 0..<SharedPlainOperations.stressRounds {
      let count = Int.random(in: 50...400, using: &generator)
      let (operations, ownRuns) = SharedPlainOperations.make(count)
      let side = OperationQueue()
      side.maxConcurrentOperationCount = Int.random(in: 1...3, using: &generator)
      let jobs = [CountingJob(), CountingJob()]
      // Tracking an operation that already finished is reported (and routed at once).
      QuietMisuse.silence(jobs)
      let viaCompletion = Locked(0)
      if queueFirst { enqueue(operations, on: side) }
      await concurrently(2, barrier: true) { index in
        for operation in operations {
          if index == 0 {
            jobs[0].track(operation) { _ in viaCompletion.mutate { $0 += 1 } }
          } else {
            jobs[1].track(operation)
          }
        }
      }
      if !queueFirst { enqueue(operations, on: side) }
      for job in jobs { try await job.run() }
      #expect(viaCompletion.value == count)
      #expect(jobs[0].routed.value == 0)
      #expect(jobs[1].routed.value == count)
      #expect(await eventually { ownRuns.value.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? 1 : 0) } })
    }
  }
}

/// Plain operations for the hook stress tests: every other one has a block of its own, which
/// counts its runs in `ownRuns`.
enum SharedPlainOperations {
  /// `JOBKIT_HOOK_STRESS_ROUNDS`, default 20.
  static var stressRounds: Int {
    ProcessInfo.processInfo.environment["JOBKIT_HOOK_STRESS_ROUNDS"].flatMap(Int.init) ?? 20
  }

  static func make(_ count: Int) -> (operations: [BlockOperation], ownRuns: Locked<[Int]>) {
    let ownRuns = Locked([Int](repeating: 0, count: count))
    let operations = (0..<count).map { index in
      let operation = BlockOperation {}
      if index % 2 == 0 {
        operation.completionBlock = { ownRuns.mutate { $0[index] += 1 } }
      }
      return operation
    }
    return (operations, ownRuns)
  }
}
