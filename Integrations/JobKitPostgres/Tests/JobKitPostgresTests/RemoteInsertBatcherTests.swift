import Foundation
import Testing

@testable import JobKitPostgres

/// The batching of starts with a fake statement (no database): who sends, what goes together,
/// and that every start gets exactly its own outcome.
@Suite struct RemoteInsertBatcherTests {
  /// A fake insert statement: records each batch's keys; the first `held` calls wait until
  /// `release()`; keys in `refused` fail, as a refused statement fails its whole batch.
  final class FakeStatement: Sendable {
    private struct State {
      var batches: [[String]] = []
      var held: Int
      var gates: [CheckedContinuation<Void, Never>] = []
      var released = 0
    }

    private let state: Locked<State>
    let refused: Set<String>

    init(held: Int = 1, refused: Set<String> = []) {
      state = Locked(State(held: held))
      self.refused = refused
    }

    var batches: [[String]] { state.withLock { $0.batches } }
    var waitingAtGate: Int { state.withLock { $0.gates.count } }

    /// Lets the oldest held call go on (or the next one to come, if none is held yet).
    func release() {
      let gate = state.withLock { state -> CheckedContinuation<Void, Never>? in
        guard !state.gates.isEmpty else {
          state.released += 1
          return nil
        }
        return state.gates.removeFirst()
      }
      gate?.resume()
    }

    func send(_ rows: [RemoteNewRow]) async throws -> [Result<RemoteInsertedRow, any Error>] {
      let hold = state.withLock { state -> Bool in
        state.batches.append(rows.map(\.key))
        return state.batches.count <= state.held
      }
      if hold {
        await withCheckedContinuation { continuation in
          let go = state.withLock { state -> Bool in
            guard state.released == 0 else {
              state.released -= 1
              return true
            }
            state.gates.append(continuation)
            return false
          }
          if go { continuation.resume() }
        }
      }
      try Task.checkCancellation()
      if rows.contains(where: { refused.contains($0.key) }) {
        return rows.map { _ in .failure(Refused()) }
      }
      return rows.map { .success(RemoteInsertedRow(id: Int64($0.key) ?? -1, final: nil)) }
    }
  }

  struct Refused: Error {}

  static func row(_ key: Int) -> RemoteNewRow {
    RemoteNewRow(kind: "k", key: "\(key)", input: Data([1]))
  }

  /// Yields until `condition` holds (the other tasks get to run; no sleeping).
  static func until(_ condition: () -> Bool) async {
    while !condition() { await Task.yield() }
  }

  @Test func startsArrivingDuringAStatementGoTogetherAndEachGetsItsOutcome() async throws {
    let batcher = RemoteInsertBatcher(maxRows: 100, maxBytes: 1 << 20)
    let statement = FakeStatement()
    let ids = try await withThrowingTaskGroup(of: (Int, Int64).self) { group in
      group.addTask { (0, try await batcher.insert(Self.row(0), send: statement.send).id) }
      await Self.until { statement.waitingAtGate == 1 }
      for key in 1...20 {
        group.addTask { (key, try await batcher.insert(Self.row(key), send: statement.send).id) }
      }
      await Self.until { batcher.waitingCount == 20 }
      statement.release()
      var ids: [Int: Int64] = [:]
      for try await (key, id) in group { ids[key] = id }
      return ids
    }
    #expect(ids == Dictionary(uniqueKeysWithValues: (0...20).map { ($0, Int64($0)) }))
    let batches = statement.batches
    #expect(batches.count == 2)
    #expect(batches.first == ["0"])
    #expect(Set(batches.last ?? []) == Set((1...20).map { "\($0)" }))
  }

  @Test func aRefusedBatchFailsItsOwnStartsOnly() async throws {
    let batcher = RemoteInsertBatcher(maxRows: 3, maxBytes: 1 << 20)
    let statement = FakeStatement(refused: ["2"])
    let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
      group.addTask { (0, (try? await batcher.insert(Self.row(0), send: statement.send)) != nil) }
      await Self.until { statement.waitingAtGate == 1 }
      // Batches of 3 in arrival order: the one that holds key 2 fails, the others succeed.
      for key in 1...6 {
        group.addTask { (key, (try? await batcher.insert(Self.row(key), send: statement.send)) != nil) }
        await Self.until { batcher.waitingCount == key }
      }
      statement.release()
      var outcomes: [Int: Bool] = [:]
      for await (key, succeeded) in group { outcomes[key] = succeeded }
      return outcomes
    }
    #expect(statement.batches == [["0"], ["1", "2", "3"], ["4", "5", "6"]])
    #expect(outcomes == [0: true, 1: false, 2: false, 3: false, 4: true, 5: true, 6: true])
  }

  @Test func aCancelledWaitingStartFailsAtOnceAndIsNotSent() async throws {
    let batcher = RemoteInsertBatcher(maxRows: 100, maxBytes: 1 << 20)
    let statement = FakeStatement()
    let first = Task { try await batcher.insert(Self.row(0), send: statement.send) }
    await Self.until { statement.waitingAtGate == 1 }
    let cancelled = Task { try await batcher.insert(Self.row(1), send: statement.send) }
    let kept = Task { try await batcher.insert(Self.row(2), send: statement.send) }
    await Self.until { batcher.waitingCount == 2 }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(batcher.waitingCount == 1)
    statement.release()
    #expect(try await first.value.id == 0)
    #expect(try await kept.value.id == 2)
    #expect(statement.batches == [["0"], ["2"]])
  }

  @Test func aSenderCancelledDuringItsStatementHandsItsBatchOn() async throws {
    let batcher = RemoteInsertBatcher(maxRows: 100, maxBytes: 1 << 20)
    // The first two statements wait at the gate: the idle start's, then the batch of 1 and 2.
    let statement = FakeStatement(held: 2)
    let first = Task { try await batcher.insert(Self.row(0), send: statement.send) }
    await Self.until { statement.waitingAtGate == 1 }
    let sender = Task { try await batcher.insert(Self.row(1), send: statement.send) }
    await Self.until { batcher.waitingCount == 1 }
    let other = Task { try await batcher.insert(Self.row(2), send: statement.send) }
    await Self.until { batcher.waitingCount == 2 }
    statement.release()
    #expect(try await first.value.id == 0)
    // 1 sends the batch of 1 and 2; it is cancelled while the statement waits.
    await Self.until { statement.waitingAtGate == 1 }
    sender.cancel()
    statement.release()
    await #expect(throws: CancellationError.self) { try await sender.value }
    // 2 sends its rest again, alone, and gets its outcome.
    #expect(try await other.value.id == 2)
    #expect(statement.batches == [["0"], ["1", "2"], ["2"]])
    #expect(batcher.waitingCount == 0)
  }
}
