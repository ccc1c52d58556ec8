// The core variants of jobkit-bench: a JobController against the raw OperationQueue code it
// replaces. Each is a child variant (`jobkit-bench --child VARIANT N`) and a package-benchmark case.
import Foundation
import JobKit

/// A variant: does N no-op tasks and returns once all of them finished.
public struct Variant: Sendable {
  /// The name `jobkit-bench --child NAME N` and the benchmarks use.
  public let name: String
  /// The variant this one's ratios are taken against.
  public let baseline: String
  /// One line on what it measures.
  public let summary: String
  /// Does N tasks (pipeline steps, dispatches) and returns once all of them finished.
  public let run: @Sendable (Int) -> Void

  /// The variant named `name` among `variants`, `compositionVariants`, `taskGroupVariants` and
  /// the child-only `nestingVariants` and `memoryVariants`, if there is one.
  public static func named(_ name: String) -> Variant? {
    (variants + compositionVariants + taskGroupVariants + nestingVariants + memoryVariants).first { $0.name == name }
  }
}

/// (a) Raw OperationQueue: N BlockOperations, counted down to a semaphore.
func runRaw(_ n: Int) {
  runBlockOperations(n, on: OperationQueue())
}

/// N BlockOperations on `queue`, counted down to a semaphore.
func runBlockOperations(_ n: Int, on queue: OperationQueue) {
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    queue.addOperation(
      BlockOperation {
        if remaining.decrement() { done.signal() }
      })
  }
  done.wait()
}

/// (b) A JobController tracking the same N tasks with a per-task completion, a group completion
/// and `allTasksFinished`. `makeTask` makes one no-op task (a BlockOperation for (b), a JobKit
/// ConcurrentOperation for (d)); `limit` sets a per-group limit for (f).
///
/// Not generic over the task's type, as a user's job is not: a job generic over it would look up
/// the runtime metadata of its tasks' nodes (`TaskNodeWithCompletion<Task>`) for every task, ~0.3k
/// instructions that a job naming its task type does not pay.
final class CountingJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the counters are only touched from main() and the job's callbacks.
  let n: Int
  let limit: Int?
  /// The tasks' class: their group.
  let taskType: Operation.Type
  let makeTask: @Sendable () -> Operation
  private(set) var finishedTasks = 0
  private(set) var groupsFinished = 0
  private(set) var allFinishedCalls = 0

  init<Task: Operation>(n: Int, limit: Int? = nil, makeTask: @escaping @Sendable () -> Task) {
    self.n = n
    self.limit = limit
    self.taskType = Task.self
    self.makeTask = makeTask
    super.init()
  }

  override func main() {
    if let limit { setMaxConcurrentTasks(limit, forGroup: taskType) }
    setCompletion(forGroup: taskType) { [unowned self] in groupsFinished += 1 }
    for _ in 0..<n {
      trackAndQueue(makeTask()) { [unowned self] _ in finishedTasks += 1 }
    }
  }

  override func allTasksFinished() {
    allFinishedCalls += 1
  }

  /// Runs the job to its end and checks its callbacks.
  func runToEnd() {
    startJob()
    waitUntilFinished()
    precondition(finishedTasks == n && allFinishedCalls == 1 && groupsFinished >= 1)
  }
}

func runJob(_ n: Int) {
  CountingJob(n: n) { BlockOperation {} }.runToEnd()
}

/// (e) As (b), with a consumer draining the job's event stream: the cost of the events feature.
func runJobWithEvents(_ n: Int) {
  let job = CountingJob(n: n) { BlockOperation {} }
  let events = job.events
  let drained = DispatchSemaphore(value: 0)
  let counter = Countdown(Int.max)
  Task {
    for await _ in events { _ = counter.decrement() }
    drained.signal()
  }
  job.runToEnd()
  drained.wait()
}

/// (f) As (b), with a per-group limit of 4 running tasks: the cost of the limits feature.
func runJobWithLimit(_ n: Int) {
  CountingJob(n: n, limit: 4) { BlockOperation {} }.runToEnd()
}

/// (a') Raw OperationQueue where each BlockOperation counts down in its `completionBlock`: the
/// cost of the only finish hook Foundation offers for a plain `Operation` on Linux, which a job
/// must use for such tasks.
func runRawCompletionBlock(_ n: Int) {
  let queue = OperationQueue()
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    let operation = BlockOperation {}
    operation.completionBlock = {
      if remaining.decrement() { done.signal() }
    }
    queue.addOperation(operation)
  }
  done.wait()
}

/// (a'') The job a user would write by hand instead of a JobController: plain BlockOperations on an
/// OperationQueue whose `completionBlock`s hop to one serial DispatchQueue, which runs each task's
/// own callback, counts the unfinished tasks per type (a per-type callback when a type's count
/// reaches zero) and calls an all-finished callback once the producer is done and nothing is left.
/// The producer counts each task up on the same queue before queueing it (a dynamic workflow does
/// not know N up front), so a finish never overtakes its count.
final class SerialCallbackJob: @unchecked Sendable {
  // @unchecked Sendable: every var is touched on `callbacks` (a serial queue) only.
  private let callbacks = DispatchQueue(label: "jobkit-bench.raw-serial")
  private let done = DispatchSemaphore(value: 0)
  private var unfinishedByType: [ObjectIdentifier: Int] = [:]
  private var producing = true
  private var finishedTasks = 0
  private var typesFinished = 0
  private var allFinishedCalls = 0

  func run(_ n: Int) {
    let queue = OperationQueue()
    let type = ObjectIdentifier(BlockOperation.self)
    for _ in 0..<n {
      let operation = BlockOperation {}
      let onFinish: @Sendable () -> Void = { [unowned self] in finishedTasks += 1 }
      callbacks.async { [unowned self] in unfinishedByType[type, default: 0] += 1 }
      operation.completionBlock = { [unowned self] in
        callbacks.async { [unowned self] in
          onFinish()
          unfinishedByType[type]! -= 1
          if unfinishedByType[type] == 0 { typesFinished += 1 }
          finishIfDone()
        }
      }
      queue.addOperation(operation)
    }
    callbacks.async { [unowned self] in
      producing = false
      finishIfDone()
    }
    done.wait()
    callbacks.sync {
      precondition(finishedTasks == n && allFinishedCalls == 1 && typesFinished >= 1)
    }
  }

  /// On `callbacks`: the all-finished callback, once the producer is done and no task is left.
  private func finishIfDone() {
    guard !producing, unfinishedByType.values.allSatisfy({ $0 == 0 }) else { return }
    allFinishedCalls += 1
    done.signal()
  }
}

func runRawSerialCallbacks(_ n: Int) {
  SerialCallbackJob().run(n)
}

/// A no-op JobKit task: finishes in `operationStart()`, optionally counting down.
final class NoOpTask: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let countdown: Countdown?
  let done: DispatchSemaphore?
  init(countdown: Countdown? = nil, done: DispatchSemaphore? = nil) {
    self.countdown = countdown
    self.done = done
  }
  override func operationStart() {
    operationDone()
    if let countdown, countdown.decrement() { done?.signal() }
  }
}

/// (c) Raw OperationQueue with N JobKit `ConcurrentOperation` tasks counted down to a semaphore.
func runRawConcurrentOperations(_ n: Int) {
  let queue = OperationQueue()
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    queue.addOperation(NoOpTask(countdown: remaining, done: done))
  }
  done.wait()
}

/// (d) A JobController tracking the same N `ConcurrentOperation` tasks, with the same callbacks
/// as (b): JobKit observes their finish directly, without Foundation's completionBlock hop.
func runNativeJob(_ n: Int) {
  CountingJob(n: n) { NoOpTask() }.runToEnd()
}

/// The core variants, and the baseline each one's ratio is taken against.
public let variants: [Variant] = [
  Variant(name: "raw", baseline: "raw", summary: "(a) OperationQueue + N BlockOperations -> semaphore", run: runRaw),
  Variant(
    name: "raw-cb", baseline: "raw",
    summary: "(a') as (a), counting down in each completionBlock (Foundation's finish hook on Linux)",
    run: runRawCompletionBlock),
  Variant(
    name: "raw-serial", baseline: "raw-cb",
    summary:
      "(a'') the job written by hand: completionBlocks hop to one serial queue that runs per-task, per-type, all-finished callbacks",
    run: runRawSerialCallbacks),
  // Against raw-cb: a job observes a plain operation through its completionBlock, so that is the floor.
  Variant(
    name: "job", baseline: "raw-cb",
    summary: "(b) JobController tracking N BlockOperations: per-task + group + all-finished callbacks",
    run: runJob),
  Variant(
    name: "job-ev", baseline: "job",
    summary: "(e) as (b), with a consumer of the job's event stream",
    run: runJobWithEvents),
  Variant(
    name: "job-lim", baseline: "job",
    summary: "(f) as (b), with setMaxConcurrentTasks(4) for the task group",
    run: runJobWithLimit),
  Variant(
    name: "raw-co", baseline: "raw-co",
    summary: "(c) OperationQueue + N JobKit ConcurrentOperations -> semaphore",
    run: runRawConcurrentOperations),
  Variant(
    name: "job-co", baseline: "raw-co",
    summary: "(d) JobController tracking N ConcurrentOperations, callbacks as (b)",
    run: runNativeJob),
]

/// A thread-safe countdown: `decrement()` returns `true` for the call that reaches zero.
final class Countdown: @unchecked Sendable {
  // @unchecked Sendable: `value` is guarded by `lock`.
  private let lock = NSLock()
  private var value: Int
  init(_ value: Int) { self.value = value }
  func decrement() -> Bool {
    lock.lock()
    defer { lock.unlock() }
    value -= 1
    return value == 0
  }
}
