import Testing

@testable import JobKitPostgres

/// The batching of starts, without a database: events in, actions out.
@Suite struct RemoteInsertStateMachineTests {
  typealias Machine = RemoteInsertStateMachine<String>

  static func machine(rows: Int = 3, bytes: Int = 100) -> Machine {
    Machine(limits: .init(rows: rows, bytes: bytes))
  }

  @Test func aStartOnAnIdleQueueIsSentAtOnceAlone() {
    var machine = Self.machine()
    guard case .send(let batch) = machine.submit(id: 1, bytes: 10, "a") else {
      Issue.record("not sent at once")
      return
    }
    #expect(batch == ["a"])
    guard case .idle = machine.sent() else {
      Issue.record("a batch was sent with nothing waiting")
      return
    }
    // Idle again: the next start goes at once too.
    guard case .send(let next) = machine.submit(id: 2, bytes: 10, "b") else {
      Issue.record("not sent at once")
      return
    }
    #expect(next == ["b"])
  }

  @Test func startsArrivingWhileAStatementIsInFlightGoTogetherInOrder() {
    var machine = Self.machine(rows: 10)
    _ = machine.submit(id: 1, bytes: 1, "a")
    for (id, start) in ["b", "c", "d"].enumerated() {
      guard case .wait = machine.submit(id: UInt64(id + 2), bytes: 1, start) else {
        Issue.record("\(start) was sent while a statement was in flight")
        return
      }
    }
    guard case .send(let batch) = machine.sent() else {
      Issue.record("the waiting starts were not sent")
      return
    }
    #expect(batch == ["b", "c", "d"])
    // One statement in flight again: a new start waits for it.
    guard case .wait = machine.submit(id: 9, bytes: 1, "e") else {
      Issue.record("sent while a statement was in flight")
      return
    }
    guard case .send(let last) = machine.sent() else {
      Issue.record("e was not sent")
      return
    }
    #expect(last == ["e"])
    guard case .idle = machine.sent() else {
      Issue.record("not idle after the last batch")
      return
    }
  }

  @Test(arguments: [
    // (rows limit, bytes limit, sizes of the waiting starts, expected batch sizes)
    (3, 1_000, [1, 1, 1, 1, 1, 1, 1], [3, 3, 1]),
    (100, 10, [4, 4, 4, 4, 4], [2, 2, 1]),
    (100, 10, [50, 1, 1, 50], [1, 2, 1]),
    (100, 10, [10, 10, 1], [1, 1, 1]),
  ])
  func aBatchIsCappedByRowsAndBytesAndALargeRowGoesAlone(
    rows: Int, bytes: Int, sizes: [Int], expected: [Int]
  ) {
    var machine = Self.machine(rows: rows, bytes: bytes)
    _ = machine.submit(id: 0, bytes: 1, "first")
    for (index, size) in sizes.enumerated() {
      _ = machine.submit(id: UInt64(index + 1), bytes: size, "s\(index)")
    }
    var batches: [Int] = []
    var sent: [String] = []
    while case .send(let batch) = machine.sent() {
      batches.append(batch.count)
      sent += batch
    }
    #expect(batches == expected)
    #expect(sent == sizes.indices.map { "s\($0)" })
  }

  @Test func aCancelledWaitingStartLeavesTheQueue() {
    var machine = Self.machine()
    _ = machine.submit(id: 1, bytes: 1, "a")
    _ = machine.submit(id: 2, bytes: 1, "b")
    _ = machine.submit(id: 3, bytes: 1, "c")
    guard case .fail(let removed) = machine.cancel(id: 2) else {
      Issue.record("a waiting start was not removed")
      return
    }
    #expect(removed == "b")
    // Twice, or for a start being sent: nothing to do.
    guard case .none = machine.cancel(id: 2), case .none = machine.cancel(id: 1) else {
      Issue.record("a start not waiting was removed")
      return
    }
    guard case .send(let batch) = machine.sent() else {
      Issue.record("c was not sent")
      return
    }
    #expect(batch == ["c"])
    guard case .none = machine.cancel(id: 3) else {
      Issue.record("a start being sent was removed")
      return
    }
  }

  @Test func aCancelOnAnIdleQueueDoesNothing() {
    var machine = Self.machine()
    guard case .none = machine.cancel(id: 7) else {
      Issue.record("removed a start that never arrived")
      return
    }
  }

  @Test func aBatchWhoseSenderLeftIsSentAgainByTheRest() {
    var machine = Self.machine()
    _ = machine.submit(id: 1, bytes: 1, "a")
    _ = machine.submit(id: 2, bytes: 1, "b")
    _ = machine.submit(id: 3, bytes: 1, "c")
    _ = machine.submit(id: 4, bytes: 1, "d")
    guard case .send(let batch) = machine.sent() else {
      Issue.record("b, c, d were not sent")
      return
    }
    #expect(batch == ["b", "c", "d"])
    // b's task was cancelled while the statement ran: c and d are sent again, nothing else.
    guard case .send(let rest) = machine.senderLeft(rest: ["c", "d"]) else {
      Issue.record("the rest was not sent again")
      return
    }
    #expect(rest == ["c", "d"])
    // A start arriving meanwhile still waits for that statement.
    guard case .wait = machine.submit(id: 5, bytes: 1, "e") else {
      Issue.record("sent beside the statement in flight")
      return
    }
    // The last of a batch leaving counts as the statement's return.
    guard case .send(let next) = machine.senderLeft(rest: []) else {
      Issue.record("e was not sent")
      return
    }
    #expect(next == ["e"])
    guard case .idle = machine.senderLeft(rest: []) else {
      Issue.record("not idle")
      return
    }
  }
}
