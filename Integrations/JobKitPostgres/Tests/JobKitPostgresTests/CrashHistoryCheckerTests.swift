import RemoteTestSupport
import Testing

/// The crash test's checker on hand-made histories: a clean one passes, and each rule has a
/// history that breaks it (so the checker can fail).
@Suite struct CrashHistoryCheckerTests {
  typealias Event = CrashHistory.Event
  typealias Row = CrashHistory.Row

  static let sep = CrashHistory.separator
  static let leaf = "r" + sep + "c0"
  static let step = "r" + sep + "step"
  static let cancelled = "x"
  static let cancelledLeaf = "x" + sep + "c0"

  /// A root `r` (attempt 2 after a kill) with a leaf and a step, and a cancelled tree `x`.
  static let rows: [Row] = [
    Row(key: "r", kind: "tree", state: "completed", attempt: 2, finishedAt: 100, parentKey: nil, output: "a,r#step"),
    Row(key: leaf, kind: "echo", state: "completed", attempt: 1, finishedAt: 50, parentKey: "r", output: "a"),
    Row(
      key: step, kind: "jobkit.step", state: "completed", attempt: 1, finishedAt: 20, parentKey: "r", output: "r#step"),
    Row(key: cancelled, kind: "tree", state: "cancelled", attempt: 1, finishedAt: 110, parentKey: nil, output: nil),
    Row(
      key: cancelledLeaf, kind: "echo", state: "cancelled", attempt: 1, finishedAt: 111, parentKey: "x", output: nil),
  ]

  /// Attempt 1 of `r` ran its step and got its result, then died; attempt 2 got both results.
  static let events: [Event] = [
    .start(key: "r", attempt: 1, time: 10, pid: 1),
    .stepBody(key: step, parentAttempt: 1, time: 11, pid: 1),
    .start(key: leaf, attempt: 1, time: 12, pid: 2),
    .delivery(parent: "r", parentAttempt: 1, child: step, value: "r#step", time: 21, pid: 1),
    .start(key: "r", attempt: 2, time: 30, pid: 3),
    .delivery(parent: "r", parentAttempt: 2, child: step, value: "r#step", time: 31, pid: 3),
    .delivery(parent: "r", parentAttempt: 2, child: leaf, value: "a", time: 51, pid: 3),
    .start(key: cancelled, attempt: 1, time: 101, pid: 2),
    .start(key: cancelledLeaf, attempt: 1, time: 102, pid: 2),
  ]

  static func check(events: [Event] = events, rows: [Row] = rows, output: String? = "a,r#step") -> [CrashHistory
    .Violation.Rule]
  {
    CrashHistory.check(
      events: events, rows: rows, rootKey: "r", rootOutput: output, expectedOutput: "a,r#step", cancelledRoot: "x"
    ).map(\.rule)
  }

  @Test func aCleanHistoryPasses() {
    #expect(Self.check() == [])
  }

  @Test func anotherOutputBreaksOutput() {
    #expect(Self.check(output: "a") == [.output])
    #expect(Self.check(output: nil) == [.output])
  }

  @Test func aResultDeliveredTwiceToOneAttemptBreaksAcceptedOnce() {
    let twice = Self.events + [.delivery(parent: "r", parentAttempt: 2, child: Self.leaf, value: "a", time: 52, pid: 3)]
    #expect(Self.check(events: twice) == [.acceptedOnce, .acceptedOnce])
  }

  @Test func aResultNeverDeliveredToTheFinalAttemptBreaksAcceptedOnce() {
    let missing = Self.events.filter {
      if case .delivery(_, 2, let child, _, _, _) = $0 { return child != Self.leaf }
      return true
    }
    #expect(Self.check(events: missing) == [.acceptedOnce])
  }

  @Test func aValueOtherThanTheStoredOneBreaksAcceptedOnce() {
    let other = Self.events + [.delivery(parent: "r", parentAttempt: 1, child: Self.leaf, value: "b", time: 40, pid: 1)]
    #expect(Self.check(events: other) == [.acceptedOnce])
  }

  @Test func twoRowsForOneKeyOrAnUnfinishedChildBreakAcceptedOnce() {
    #expect(Self.check(rows: Self.rows + [Self.rows[1]]) == [.acceptedOnce])
    var rows = Self.rows
    rows[1].state = "running"
    rows[1].finishedAt = nil
    #expect(Self.check(rows: rows) == [.acceptedOnce])
  }

  @Test func aHandlerStartedAfterItsRowWasFinalBreaksStartedWhenFinal() {
    let late = Self.events + [.start(key: Self.leaf, attempt: 1, time: 60, pid: 2)]
    #expect(Self.check(events: late) == [.startedWhenFinal])
    let unknown = Self.events + [.start(key: "r", attempt: 3, time: 40, pid: 2)]
    #expect(Self.check(events: unknown) == [.startedWhenFinal])
  }

  @Test func aStepBodyAfterItsRowWasStoredBreaksStepRanWhenFinal() {
    let again = Self.events + [.stepBody(key: Self.step, parentAttempt: 2, time: 30.5, pid: 3)]
    #expect(Self.check(events: again) == [.stepRanWhenFinal])
  }

  @Test func aLiveRowInTheCancelledTreeBreaksCancelledTreeLive() {
    var rows = Self.rows
    rows[4].state = "available"
    rows[4].finishedAt = nil
    #expect(Self.check(rows: rows) == [.cancelledTreeLive])
    rows[4].state = "running"
    #expect(Self.check(rows: rows) == [.cancelledTreeLive])
  }

  @Test func eventsRoundTripThroughTheirLines() {
    for event in Self.events {
      #expect(Event(line: Substring(event.line)) == event)
    }
    #expect(Event(line: "start\t1.5") == nil)
  }
}
