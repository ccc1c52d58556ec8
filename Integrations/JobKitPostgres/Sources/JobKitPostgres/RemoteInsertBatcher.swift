import Foundation

/// A row a ``RemoteWork``'s start inserts.
struct RemoteNewRow: Sendable {
  let kind: String
  let key: String
  let input: Data
  /// The earliest start (``RemoteQueue/enqueue(_:_:idempotencyKey:runAt:)``); `nil`: now.
  var runAfter: Date? = nil
  /// The task's concurrency key (``RemoteQueue/Limits``); `""`: none.
  var concurrencyKey = ""
  /// The row of the durable job whose handler made the task (``DurableScope``), else 0.
  var parentID: Int64 = 0
  /// Until when the start's insert is tried again while the database cannot be reached (its
  /// start plus the queue's `reconnectTimeout`): a batch is tried until its earliest deadline.
  var deadline: ContinuousClock.Instant = .now
}

/// Where a start's insert ended: the id of its key's row and, if that row was final already,
/// its outcome.
struct RemoteInsertedRow: Sendable {
  let id: Int64
  /// The row's generation: a cancel of this start names it (a later re-run bumps it).
  var generation: Int32 = 0
  let final: RemoteRow?
}

/// Sends the starts of a queue's ``RemoteWork``s to the database in batches, as
/// ``RemoteInsertStateMachine`` decides: one statement in flight, the starts that arrive
/// meanwhile sent together when it returns.
///
/// No task of its own: the start whose arrival (or whose batch) is due sends the batch from its
/// own task, gives each start of the batch its outcome, hands the next batch to the first start
/// in it, and returns its own outcome. A sender cancelled while its statement runs hands the rest
/// of its batch to the next start in it (sent again: the statement is idempotent by key). Only
/// the state machine is under the lock; starts are resumed outside it.
final class RemoteInsertBatcher: Sendable {
  /// Sends `rows` in one statement and returns each row's outcome, in order; throws (only) when
  /// the calling task was cancelled before the outcomes were known.
  typealias Send = @Sendable ([RemoteNewRow]) async throws -> [Result<RemoteInsertedRow, any Error>]

  /// What a waiting start is resumed with.
  private enum Turn: Sendable {
    /// Its outcome.
    case done(Result<RemoteInsertedRow, any Error>)
    /// Its turn to send this batch (it is the first of it).
    case send([Pending])
  }

  /// A start that waits for its turn or its outcome.
  private struct Pending: Sendable {
    let id: UInt64
    let row: RemoteNewRow
    let continuation: CheckedContinuation<Turn, Never>
  }

  private struct State: Sendable {
    var machine: RemoteInsertStateMachine<Pending>
    var lastID: UInt64 = 0
  }

  private let state: Locked<State>

  /// Batches of at most `maxRows` rows and `maxBytes` bytes of input (a larger row goes alone).
  init(maxRows: Int, maxBytes: Int) {
    state = Locked(State(machine: RemoteInsertStateMachine(limits: .init(rows: maxRows, bytes: maxBytes))))
  }

  /// Inserts `row` with the next batch (with `send`), or at once when no statement is in flight.
  /// Cancelling the calling task while the start waits for its batch throws `CancellationError`
  /// at once; once its batch is being sent, the start gets the batch's outcome.
  func insert(_ row: RemoteNewRow, send: Send) async throws -> RemoteInsertedRow {
    let id = state.withLock { state -> UInt64 in
      state.lastID += 1
      return state.lastID
    }
    var turn = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
        let pending = Pending(id: id, row: row, continuation: continuation)
        let action = state.withLock { $0.machine.submit(id: id, bytes: row.input.count, pending) }
        switch action {
        case .send(let batch):
          continuation.resume(returning: .send(batch))
        case .wait:
          if Task.isCancelled { cancel(id) }
        }
      }
    } onCancel: {
      cancel(id)
    }
    while true {
      switch turn {
      case .done(let outcome):
        return try outcome.get()
      case .send(let batch):
        turn = await sendBatch(batch, sender: id, send: send)
      }
    }
  }

  /// Sends `batch` (`sender` is one of its starts, the caller's), resumes its other starts with
  /// their outcomes, hands the next batch on, and returns the sender's outcome.
  private func sendBatch(_ batch: [Pending], sender: UInt64, send: Send) async -> Turn {
    var own: Result<RemoteInsertedRow, any Error> = .failure(CancellationError())
    let next: RemoteInsertStateMachine<Pending>.NextAction
    do {
      let outcomes = try await send(batch.map(\.row))
      var resumptions: [(CheckedContinuation<Turn, Never>, Result<RemoteInsertedRow, any Error>)] = []
      for (index, pending) in batch.enumerated() {
        let outcome =
          index < outcomes.count
          ? outcomes[index]
          : .failure(RemoteQueueError(.taskVanished, message: "the insert returned no outcome for a row"))
        if pending.id == sender {
          own = outcome
        } else {
          resumptions.append((pending.continuation, outcome))
        }
      }
      next = state.withLock { $0.machine.sent() }
      for (continuation, outcome) in resumptions {
        continuation.resume(returning: .done(outcome))
      }
    } catch {
      own = .failure(error)
      let rest = batch.filter { $0.id != sender }
      next = state.withLock { $0.machine.senderLeft(rest: rest) }
    }
    if case .send(let batch) = next, let first = batch.first {
      first.continuation.resume(returning: .send(batch))
    }
    return .done(own)
  }

  /// The starts waiting for a statement.
  var waitingCount: Int {
    state.withLock { $0.machine.waitingCount }
  }

  /// A start's task was cancelled: a start still waiting for its batch leaves and fails.
  private func cancel(_ id: UInt64) {
    let action = state.withLock { $0.machine.cancel(id: id) }
    if case .fail(let pending) = action {
      pending.continuation.resume(returning: .done(.failure(CancellationError())))
    }
  }
}
