// The composition cases of jobkit-bench (issue 12, item 5): each JobKit composition against the
// raw OperationQueue code a user would otherwise write. Every case is a child variant, so
// `jobkit-bench --child VARIANT N` runs it alone (under callgrind, for example).
import Foundation
import JobKit

/// (g) A ConcurrentGroup taking N BlockTasks from a lazy sequence as it runs them (at most
/// `ConcurrentGroup.defaultMaxRunning` made and unfinished at once), run to its end. Baseline: `raw`.
func runConcurrentGroup(_ n: Int) {
  let group = ConcurrentGroup(taking: (0..<n).lazy.map { _ in BlockTask {} })
  try! group.runAndWait()
}

/// (g') As (g), the N BlockTasks added one by one before the group runs, so all are held at once.
func runConcurrentGroupAdded(_ n: Int) {
  let group = ConcurrentGroup()
  for _ in 0..<n {
    group.add(BlockTask {})
  }
  try! group.runAndWait()
}

/// As (g'), without the group and without running them: N BlockTasks made and held at once,
/// then released. Its peak memory is the tasks' own, so (g')'s minus this is what the group
/// (and the queue running its tasks) keeps per task. Child only (`--child blk-held N`, under
/// `/usr/bin/time -f %M`).
func runHeldBlockTasks(_ n: Int) {
  let tasks = (0..<n).map { _ in BlockTask {} }
  withExtendedLifetime(tasks) {}
}

/// As (g'), without running the group: N BlockTasks added to a ConcurrentGroup that never
/// starts, then released with it. Its peak memory minus `blk-held`'s is what the group keeps per
/// waiting task (its job's node and the admission line's slot); `grp-add`'s minus this one's is
/// what running adds (the queue's bookkeeping of every queued task). Child only
/// (`--child grp-held N`, under `/usr/bin/time -f %M`).
func runHeldConcurrentGroup(_ n: Int) {
  let group = ConcurrentGroup()
  for _ in 0..<n {
    group.add(BlockTask {})
  }
  withExtendedLifetime(group) {}
}

/// (h) A SequentialGroup of N BlockTasks, added one by one, run to its end. Baseline: `raw-ser`.
func runSequentialGroup(_ n: Int) {
  let group = SequentialGroup()
  for _ in 0..<n {
    group.add(BlockTask {})
  }
  try! group.runAndWait()
}

/// (h') Raw serial OperationQueue: N BlockOperations one at a time, counted down to a semaphore.
func runRawSerial(_ n: Int) {
  let queue = OperationQueue()
  queue.maxConcurrentOperationCount = 1
  runBlockOperations(n, on: queue)
}

/// The event of the CommandMap case.
struct BenchEvent: Sendable {}

/// (i) N dispatches of one event on a CommandMap with three block mappings (a sequential dispatch
/// of three commands each), all dispatched, then all waited for. Baseline: `raw-cmd`.
func runCommandMap(_ n: Int) {
  let map = CommandMap()
  for priority in 0..<3 {
    map.map(BenchEvent.self, priority: priority, block: { _ in })
  }
  var dispatches: [CommandDispatch] = []
  dispatches.reserveCapacity(n)
  for _ in 0..<n {
    dispatches.append(map.dispatch(BenchEvent()))
  }
  for dispatch in dispatches {
    dispatch.waitUntilFinished()
  }
}

/// (i') Raw: per dispatch, three BlockOperations made dependent (a -> b -> c) on a queue of their
/// own, the last one counting down to a semaphore. (One queue for all of them would not do:
/// corelibs rescans the whole queue on every finish, so thousands of dependency chains on one
/// queue are quadratic, 1.3 ms per chain at N = 10,000.)
func runRawCommands(_ n: Int) {
  let done = DispatchSemaphore(value: 0)
  let remaining = Countdown(n)
  for _ in 0..<n {
    let queue = OperationQueue()
    let first = BlockOperation {}
    let second = BlockOperation {}
    let third = BlockOperation {
      if remaining.decrement() { done.signal() }
    }
    second.addDependency(first)
    third.addDependency(second)
    queue.addOperations([first, second, third], waitUntilFinished: false)
  }
  done.wait()
}

/// Steps per pipeline in the pipeline cases.
let pipelineLength = 100

/// A pipeline of `pipelineLength` steps, each adding one to the previous result.
func makePipeline() -> Pipeline<Int> {
  var pipeline = Pipeline.start { 0 }
  for _ in 1..<pipelineLength {
    pipeline = pipeline.then { $0 + 1 }
  }
  return pipeline
}

/// (j) N pipeline steps: N / 100 pipelines of 100 steps, each built and run to its end in turn.
func runPipelines(_ n: Int) {
  for _ in 0..<(n / pipelineLength) {
    let pipeline = makePipeline()
    try! pipeline.runAndWait()
    precondition(pipeline.result == pipelineLength - 1)
  }
}

/// (j') As (j), building the pipelines only: the cost of `then`.
func runPipelineBuilds(_ n: Int) {
  for _ in 0..<(n / pipelineLength) {
    withExtendedLifetime(makePipeline()) {}
  }
}

/// The composition variants, and the baseline each one's ratio is taken against.
public let compositionVariants: [Variant] = [
  Variant(
    name: "grp-co", baseline: "raw",
    summary: "(g) ConcurrentGroup taking N BlockTasks from a lazy sequence (vs (a))", run: runConcurrentGroup),
  Variant(
    name: "grp-add", baseline: "raw",
    summary: "(g') ConcurrentGroup of N BlockTasks added up front (vs (a))", run: runConcurrentGroupAdded),
  Variant(
    name: "raw-ser", baseline: "raw-ser",
    summary: "(h') serial OperationQueue + N BlockOperations -> semaphore", run: runRawSerial),
  Variant(
    name: "grp-seq", baseline: "raw-ser",
    summary: "(h) SequentialGroup of N BlockTasks (vs (h'))", run: runSequentialGroup),
  Variant(
    name: "raw-cmd", baseline: "raw-cmd",
    summary: "(i') N x three dependent BlockOperations (a -> b -> c) on one queue", run: runRawCommands),
  Variant(
    name: "cmd", baseline: "raw-cmd",
    summary: "(i) N CommandMap dispatches of three block commands (vs (i'))", run: runCommandMap),
  Variant(
    name: "pipe", baseline: "pipe",
    summary: "(j) N steps as N/100 pipelines of 100 steps, built and run", run: runPipelines),
  Variant(
    name: "pipe-bld", baseline: "pipe",
    summary: "(j') as (j), building only (the cost of then)", run: runPipelineBuilds),
]

/// Child-only variants that measure memory rather than time.
let memoryVariants: [Variant] = [
  Variant(
    name: "blk-held", baseline: "grp-add",
    summary: "N BlockTasks held at once, not run (the tasks' own memory)", run: runHeldBlockTasks),
  Variant(
    name: "grp-held", baseline: "blk-held",
    summary: "N BlockTasks added to a ConcurrentGroup that never runs (the group's memory per waiting task)",
    run: runHeldConcurrentGroup),
]
