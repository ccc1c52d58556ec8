import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// The "nothing runs after a stop" check of `CompositionReasonChecks` on a time limit that runs
/// out while a runner (a plain `ConcurrentOperation`) is inside its `operationStart()`: the
/// limited group cancels the runner before the advance returns, the runner hands the stop down
/// to its dispatch only once its `operationStart()` returned, and the dispatch's group may pull
/// and run a task between the two (composition seed 7245). The events are recorded through the
/// workflow's log in the order of that run; the limit runs out on a `ManualClock`.
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
}
