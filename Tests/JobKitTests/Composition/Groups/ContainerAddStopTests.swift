import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// A task whose group holds it in flight: setting its context (which a group does right before
/// tracking and queueing it) blocks until the test releases it, so the thread adding (or
/// resuming) is held between the group handing the task out and the job tracking it, with no
/// sleep. Records whether its work ran.
final class GateOnContext: ConcurrentOperation, ContextConsuming, @unchecked Sendable {
  // @unchecked Sendable: `stored` is written once by the group before the task is queued;
  // the rest are latches and a lock-protected flag.
  let entered = Latch()
  let release = Latch()
  private let ran = Locked(false)
  private var stored: JobContext?

  var context: JobContext? {
    get { stored }
    set {
      entered.open()
      _ = release.wait(timeout: 30)
      stored = newValue
    }
  }

  var didRun: Bool { ran.value }

  override func operationStart() {
    ran.mutate { $0 = true }
    operationDone()
  }
}

/// Counts the commands running at once: a command calls `enter()` when its work starts and
/// `leave()` right before it finishes.
final class ConcurrencyMeter: Sendable {
  private let counts = Locked((running: 0, most: 0))

  func enter() {
    counts.mutate { counts in
      counts.running += 1
      counts.most = max(counts.most, counts.running)
    }
  }

  func leave() {
    counts.mutate { $0.running -= 1 }
  }

  /// The most that ever ran at once.
  var most: Int { counts.value.most }
}

/// A command whose work runs until the test (or another thread) calls `finish()`, whatever a
/// cancel says: the uncooperative command of issue 23's item 4.
final class StubbornCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init; the latch and meter are thread-safe.
  let startedLatch = Latch()
  let meter: ConcurrencyMeter

  init(meter: ConcurrencyMeter) {
    self.meter = meter
    super.init()
  }

  override func operationStart() {
    meter.enter()
    startedLatch.open()
  }

  func finish() {
    meter.leave()
    operationDone()
  }
}

/// Issue 23, items 2 to 4: every container decides add-versus-stop in one transition under its
/// lock, and a stop waits for the adds in flight (see <doc:RoutingAndThreads>, "Adding and
/// stopping"). Each test holds an add (or resume) in flight with `GateOnContext`, then stops the
/// container.
@Suite("Containers: add versus stop", .timeLimit(.minutes(2)))
struct ContainerAddStopTests {
  /// Item 2: an add that took a task out of a running group, racing the group's cancel, keeps
  /// the group open until the task is tracked; the stopping job then cancels it, and it finishes
  /// without running, before the group. (It was tracked after the group finished: never run,
  /// cancelled or finished.)
  @Test(arguments: GroupKind.allCases)
  func anAddInFlightKeepsACancelledGroupOpenUntilItsTaskFinished(kind: GroupKind) async {
    let running = ManualTask("running", finishesOnCancel: true)
    let group = kind.make()
    // Tracked by the group itself, so a sequential group's added task starts at once too.
    group.trackAndQueue(running)
    group.startJob()
    #expect(await running.startedLatch.opened())
    let added = GateOnContext()
    let addReturned = Latch()
    Thread {
      group.add(added)
      addReturned.open()
    }.start()
    #expect(await added.entered.opened())
    group.cancel()  // `running` finishes at once; the add in flight must keep the group open
    #expect(!group.isFinished)
    added.release.open()
    #expect(await addReturned.opened())
    #expect(await added.finishedSoon())
    #expect(added.isCancelled && !added.didRun)
    #expect(await group.finishedSoon())
    #expect(group.isCancelled && group.misuses.isEmpty)
  }

  /// Item 2 from the other side: a task added to a group that is already being cancelled is
  /// tracked, cancelled and waited for, also when it is not ready (it used to be started
  /// untracked, or queued, and could finish after the group).
  @Test(arguments: GroupKind.allCases)
  func aTaskAddedWhileTheGroupStopsFinishesBeforeIt(kind: GroupKind) async {
    let running = ManualTask("running", finishesOnCancel: false)
    let group = kind.make()
    group.trackAndQueue(running)
    group.startJob()
    #expect(await running.startedLatch.opened())
    group.cancel()
    let blocker = ManualTask("blocker")  // never queued: `notReady` stays not ready
    let notReady = BlockOperation {}
    notReady.addDependency(blocker)
    let ready = InstantTask()
    group.add(ready)
    group.add(notReady)
    running.finish()
    #expect(await group.finishedSoon())
    #expect(ready.isFinished && ready.isCancelled)
    #expect(notReady.isFinished && notReady.isCancelled)
    #expect(group.misuses.isEmpty)
  }

  /// Item 3: a resume takes held commands out of a burst while `cancelAll()` ends it: the burst
  /// (and so `onDrained` and `drained()`) waits until they were tracked, cancelled and finished.
  @Test func aResumeRacingCancelAllLosesNoCommand() async {
    let queue = CommandQueue(mode: .concurrent)
    let drains = DrainProbe()
    drains.install(on: queue)
    let running = ManualTask("running", finishesOnCancel: true)
    queue.add(running)
    #expect(await running.startedLatch.opened())
    queue.pause()
    let held = GateOnContext()
    queue.add(held)
    let resumeReturned = Latch()
    Thread {
      queue.resume()
      resumeReturned.open()
    }.start()
    #expect(await held.entered.opened())
    queue.cancelAll()  // `running` finishes at once; the resume in flight must keep the burst open
    #expect(drains.all.isEmpty)
    held.release.open()
    #expect(await resumeReturned.opened())
    #expect(await drains.drained())
    #expect(held.isFinished && held.isCancelled && !held.didRun)
    await queue.drained()
    #expect(drains.all.count == 1)
  }

  /// Item 4: after `cancelAll()`, a sequential queue starts a new command only once the cancelled
  /// one that ignores the cancel finished: one command at a time, across bursts too.
  @Test func aSequentialQueueStartsNothingBesideACancelledCommandStillRunning() async {
    let queue = CommandQueue(mode: .sequential)
    let meter = ConcurrencyMeter()
    let stubborn = StubbornCommand(meter: meter)
    queue.add(stubborn)
    #expect(await stubborn.startedLatch.opened())
    queue.cancelAll()
    let next = StubbornCommand(meter: meter)
    queue.add(next)
    // Would start at once beside `stubborn` if the new burst did not wait for the old one.
    #expect(await !next.startedLatch.opened(timeout: 0.5))
    stubborn.finish()
    #expect(await next.startedLatch.opened())
    next.finish()
    await queue.drained()
    #expect(meter.most == 1)
    #expect(stubborn.isCancelled && !next.isCancelled)
  }
}
