import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// Issue 23, item 6: a value the user handed to a composition type (a context value, a handler,
/// a step, a command) is released after JobKit's locks, never under one. Each probe's `deinit`
/// calls back into the object that dropped it (a member that takes that object's lock): released
/// under that lock, it would deadlock and `released` would never open.
@Suite("Composition releases the user's values outside its locks", .timeLimit(.minutes(1)))
struct ReleaseOutsideLocksTests {
  // MARK: - JobContext

  enum ContextWrite: String, CaseIterable, Sendable {
    case set, setNil, update, remove
  }

  @Test(arguments: ContextWrite.allCases)
  func aReplacedContextValue(write: ContextWrite) async {
    let context = JobContext()
    var probe: ReleaseProbe? = ReleaseProbe { [weak context] in _ = context?[.releaseProbe] }
    let released = probe!.released
    context[.releaseProbe] = probe
    probe = nil
    onOwnThread {
      switch write {
      case .set: context[.releaseProbe] = ReleaseProbe()
      case .setNil: context[.releaseProbe] = nil
      case .update: context.update(.releaseProbe, default: ReleaseProbe()) { $0 = ReleaseProbe() }
      case .remove: context.removeValue(forKey: .releaseProbe)
      }
    }
    #expect(await released.waitOpen(timeout: 30))
  }

  // MARK: - ConcurrentGroup, SequentialGroup

  @Test(arguments: GroupKind.allCases)
  func aReplacedGroupContext(kind: GroupKind) async {
    let group = kind.make()
    var probe: ReleaseProbe? = ReleaseProbe { [weak group] in _ = group?.context }
    let released = probe!.released
    group.context[.releaseProbe] = probe  // in the group's own context, held by the group alone
    probe = nil
    onOwnThread { group.context = JobContext() }
    #expect(await released.waitOpen(timeout: 30))
  }

  /// A nested group adopts its parent's context before it starts, dropping its own.
  @Test(arguments: GroupKind.allCases)
  func aNestedGroupsOwnContext(kind: GroupKind) async throws {
    let child = kind.make([BlockTask {}])
    var probe: ReleaseProbe? = ReleaseProbe { [weak child] in _ = child?.context }
    let released = probe!.released
    child.context[.releaseProbe] = probe
    probe = nil
    let parent = kind.make([child])
    // The parent's context has the key: the child's value is not copied over when it adopts it.
    parent.context[.releaseProbe] = ReleaseProbe()
    parent.startJob()
    let ok = await released.waitOpen(timeout: 30)
    #expect(ok)
    guard ok else { return }
    #expect(await parent.finishedSoon(within: 30))
  }

  /// The tasks a group ran, and the ones it dropped when cancelled, with what they captured.
  @Test(arguments: GroupKind.allCases, [false, true])
  func aGroupsTasks(kind: GroupKind, cancelled: Bool) async throws {
    let group = kind.make()
    var probe: ReleaseProbe? = ReleaseProbe { [weak group] in
      _ = group?.context  // the group's lock
      _ = group?.failures  // the job's lock
    }
    let released = probe!.released
    if cancelled {
      group.add(ManualTask("first"))
      group.cancel()
    }
    group.add(BlockTask { [probe] in _ = probe })
    probe = nil
    group.startJob()
    let ok = await released.waitOpen(timeout: 30)
    #expect(ok)
    guard ok else { return }
    #expect(await group.finishedSoon(within: 30))
  }

  // MARK: - BlockTask

  @Test func aReplacedBlockTaskContext() async {
    let task = BlockTask {}
    var probe: ReleaseProbe? = ReleaseProbe { [weak task] in _ = task?.context }
    let released = probe!.released
    do {
      let context = JobContext()
      context[.releaseProbe] = probe
      task.context = context
    }
    probe = nil
    onOwnThread { task.context = JobContext() }
    #expect(await released.waitOpen(timeout: 30))
  }

  // MARK: - Work

  /// A job drops a `Work` it ran (its body, its output) and the completion it was tracked with.
  @Test(arguments: [false, true])
  func aWorkAndItsCompletion(probeInCompletion: Bool) async throws {
    let released = Locked<Latch?>(nil)
    let job = ScriptedJob { job in
      let probe = ReleaseProbe { [weak job] in _ = job?.failures }
      released.mutate { $0 = probe.released }
      if probeInCompletion {
        job.trackAndQueue(resultOf: Work { 1 }) { [probe] _ in _ = probe }
      } else {
        job.trackAndQueue(resultOf: Work { [probe] in probe }) { _ in }
      }
    }
    job.startJob()
    #expect(await job.finishedSoon(within: 30))
    #expect(await released.value?.waitOpen(timeout: 30) == true)
  }

  // MARK: - Pipeline

  enum PipelinePart: String, CaseIterable, Sendable {
    case firstStep, laterStep, onError, finally
  }

  enum PipelineEnd: String, CaseIterable, Sendable {
    /// Cancelled before its queue started it: it drops its steps and handlers unrun.
    case cancelledBeforeStart
    /// Every step returned: the error handler is dropped uncalled.
    case succeeded
    /// A step threw: `finally`'s handler is dropped uncalled.
    case failed
  }

  @Test(arguments: PipelineEnd.allCases, PipelinePart.allCases)
  func aPipelinesStepsAndHandlers(end: PipelineEnd, part: PipelinePart) async throws {
    let box = Locked<Pipeline<Int>?>(nil)
    var probe: ReleaseProbe? = ReleaseProbe { _ = box.value?.result }  // the pipeline's stripe lock
    let released = probe!.released
    let fails = end == .failed
    let pipeline = Pipeline.start { [probe = part == .firstStep ? probe : nil] () throws -> Int in
      _ = probe
      return 1
    }
    .then { [probe = part == .laterStep ? probe : nil] value throws -> Int in
      _ = probe
      if fails { throw TestError(1) }
      return value + 1
    }
    .onError { [probe = part == .onError ? probe : nil] _ in _ = probe }
    box.mutate { $0 = pipeline }
    do {
      let handler: @Sendable (Int) -> Void = { [probe = part == .finally ? probe : nil] _ in _ = probe }
      probe = nil
      if end == .cancelledBeforeStart {
        pipeline.cancel()
      }
      pipeline.finally(handler)
    }
    let ok = await released.waitOpen(timeout: 30)
    #expect(ok)
    guard ok else { return }
    _ = try? await pipeline.waitForFinish()
    #expect(pipeline.isFinished)
    box.mutate { $0 = nil }
  }

  @Test func aReplacedPipelineErrorHandler() async {
    let box = Locked<Pipeline<Int>?>(nil)
    var probe: ReleaseProbe? = ReleaseProbe { _ = box.value?.result }
    let released = probe!.released
    let pipeline = Pipeline.start { 1 }.onError { [probe] _ in _ = probe }
    box.mutate { $0 = pipeline }
    probe = nil
    onOwnThread { _ = pipeline.onError { _ in } }
    #expect(await released.waitOpen(timeout: 30))
    box.mutate { $0 = nil }
  }

  // MARK: - CommandQueue

  @Test func aReplacedOnDrainedHandler() async {
    let queue = CommandQueue(mode: .sequential)
    var probe: ReleaseProbe? = ReleaseProbe { [weak queue] in _ = queue?.isPaused }
    let released = probe!.released
    queue.onDrained = { [probe] _ in _ = probe }
    probe = nil
    onOwnThread { queue.onDrained = nil }
    #expect(await released.waitOpen(timeout: 30))
  }

  @Test(arguments: [CommandQueue.Mode.sequential, .concurrent])
  func theCommandsAQueueRan(mode: CommandQueue.Mode) async {
    let queue = CommandQueue(mode: mode)
    var probe: ReleaseProbe? = ReleaseProbe { [weak queue] in
      _ = queue?.isPaused  // the queue's lock
      _ = queue?.context[.releaseProbe]  // its context's lock
    }
    let released = probe!.released
    queue.add(BlockTask { [probe] in _ = probe })
    queue.add(BlockTask {})
    probe = nil
    let ok = await released.waitOpen(timeout: 30)
    #expect(ok)
    guard ok else { return }
    await queue.drained()
  }
}
