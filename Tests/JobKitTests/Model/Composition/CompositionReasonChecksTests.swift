import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// The "nothing runs after a stop" check of `CompositionReasonChecks` on a time limit that runs
/// out while a runner (a plain `ConcurrentOperation`) is inside its `operationStart()`: the
/// limited group cancels the runner before the advance returns, the runner hands the stop down
/// to its dispatch only once its `operationStart()` returned, and the dispatch's group may pull
/// and run a task between the two (composition seed 7245); and on two cancels of a group racing,
/// where the second returns before the first handed the stop down to a group below, to which a
/// task may be added and run meanwhile (composition seed 111). The events are recorded through
/// the workflow's log in the order of those runs; the limit runs out on a `ManualClock`.
@Suite("Composition reason checks")
struct CompositionReasonChecksTests {
  /// n0 concurrent [limit 2 s] [n1 dispatch(seq) [n2 seq(taking) [n3 leaf]], n4 leaf]; the
  /// clock advances 4 s, inline, when n4 starts.
  private static let plan: CompositionPlan = {
    let later = LeafSpec(finish: .later, fails: false, honorsCancel: false)
    let leaf = NodePlan(id: 3, kind: .leaf(later))
    let group = NodePlan(id: 2, kind: .sequential(stopsOnFailure: true, taking: true), children: [leaf])
    let runner = NodePlan(id: 1, kind: .dispatch(concurrent: false), children: [group])
    let trigger = NodePlan(id: 4, kind: .leaf(later))
    let root = NodePlan(id: 0, kind: .concurrent(takingMax: nil), children: [runner, trigger], timeLimit: 2)
    let storm = StormPlan(action: .advance(4), trigger: .leafStarts(4), inline: true, yields: 0)
    return CompositionPlan(seed: 7245, root: root, storms: [storm], features: [])
  }()

  /// Replays the limit running out on n0, with n3 made (and run) before or after n1 handed the
  /// stop down to its dispatch, and returns the check's violations.
  private func violations(madeAfterHandDown: Bool) async -> [String] {
    let log = CompositionLog(plan: Self.plan)
    let runner = TestTask("n1")
    let trigger = TestTask("n4")
    let root = ConcurrentGroup([runner, trigger])
    root.clock = log.clock
    root.timeLimit = .seconds(2)
    let group = TestTask("n2")
    log.made(root, node: 0)
    log.made(runner, node: 1)
    log.made(group, node: 2)
    log.made(trigger, node: 4)
    root.start()
    #expect(await trigger.startedLatch.waitOpen())
    #expect(await log.clock.waitForScheduled(1))
    for (index, _) in log.leafStarted(4, attempt: 1) {
      log.strike(index)
      log.clock.advance(by: .seconds(4))
      log.stormReturned(index)
    }
    // The limited group cancelled both its tasks before the advance returned.
    #expect(runner.cancellationReason.flatMap(CompositionReasons.limitSeconds) == 2)
    #expect(trigger.cancellationReason.flatMap(CompositionReasons.limitSeconds) == 2)
    await #expect(throws: JobKitError.self) { try await root.waitForFinish() }
    if let error = root.error { log.rootThrew(error) }
    let leaf = TestTask("n3")
    let pullAndRun = {
      log.made(leaf, node: 3)
      _ = log.leafStarted(3, attempt: 1)
      log.leafEnded(3, attempt: 1)
    }
    let handDown = {
      group.cancel(reason: runner.cancellationReason ?? CancellationError())
      log.handedDown(1)
    }
    if madeAfterHandDown {
      handDown()
      pullAndRun()
    } else {
      pullAndRun()
      handDown()
    }
    return CompositionReasonChecks(plan: Self.plan, events: log.events).violations
  }

  @Test func aTaskPulledBeforeTheRunnerHandedTheStopDownMayRun() async {
    let violations = await violations(madeAfterHandDown: false)
    #expect(violations.isEmpty, "\(violations)")
  }

  @Test func aTaskPulledAfterTheRunnerHandedTheStopDownMustNotRun() async {
    let violations = await violations(madeAfterHandDown: true)
    #expect(violations == ["n3 was made after advance 4 s when n4 starts inline +0 reached n2, yet it ran"])
  }

  /// n0 concurrent [n1 concurrent [n2 leaf(later, adds)] late [n3 leaf]]; two storms cancel n0
  /// from two threads when n2 adds.
  private static let twoStopsPlan: CompositionPlan = {
    let adder = LeafSpec(finish: .later, fails: false, honorsCancel: true, addsLate: true)
    let late = NodePlan(id: 3, kind: .leaf(LeafSpec(finish: .onThread, fails: false, honorsCancel: false)))
    let children = [NodePlan(id: 2, kind: .leaf(adder))]
    let group = NodePlan(id: 1, kind: .concurrent(takingMax: nil), children: children, late: [late])
    let root = NodePlan(id: 0, kind: .concurrent(takingMax: nil), children: [group])
    let storms = [
      StormPlan(action: .cancelReason(0), trigger: .adding(2), inline: false, yields: 0),
      StormPlan(action: .cancel(0), trigger: .adding(2), inline: false, yields: 0),
    ]
    return CompositionPlan(seed: 111, root: root, storms: storms, features: [])
  }()

  /// Replays two cancels of n0 racing (composition seed 111): the first records n0's stop, the
  /// second finds n0 stopping and returns at once, and the first hands the stop down to n1
  /// only after. n2 adds n3 to n1 (reading n1 not cancelled, as the builder's adder does, just
  /// before the add) before or after that hand-down. Returns the check's violations.
  private func violations(addedAfterHandDown: Bool) -> [String] {
    let log = CompositionLog(plan: Self.twoStopsPlan)
    let root = log.made(TestTask("n0"), node: 0)
    let group = log.made(TestTask("n1"), node: 1)
    let adder = log.made(TestTask("n2"), node: 2)
    log.strike(0)
    root.cancel(reason: ReasonError(node: 0))
    log.strike(1)
    root.cancel()
    log.stormReturned(1)
    let handDown = {
      let reason = root.cancellationReason ?? CancellationError()
      group.cancel(reason: reason)
      adder.cancel(reason: reason)
    }
    if addedAfterHandDown { handDown() }
    _ = log.made(TestTask("n3"), node: 3)
    if !group.isCancelled { log.addingUncancelled(1) }
    _ = log.leafStarted(3, attempt: 1)
    log.leafEnded(3, attempt: 1)
    if !addedAfterHandDown { handDown() }
    log.stormReturned(0)
    return CompositionReasonChecks(plan: Self.twoStopsPlan, events: log.events).violations
  }

  @Test func aTaskAddedToAGroupBeforeTheStopReachedItMayRun() {
    let violations = violations(addedAfterHandDown: false)
    #expect(violations.isEmpty, "\(violations)")
  }

  @Test func aTaskAddedToAGroupAfterTheStopReachedItMustNotRun() {
    let violations = violations(addedAfterHandDown: true)
    #expect(violations == ["n3 was made after cancel n0 when n2 adds +0 reached n0, yet it ran"])
  }
}
