/// Decides when the starts of ``RemoteWork``s are sent to the database and which go together.
///
/// One insert statement is in flight at a time. A start that arrives while none is in flight is
/// sent at once, alone (no added latency on an idle queue); starts that arrive while one is in
/// flight wait, in order, and go together as the next batch when it returns, at most
/// ``Limits/rows`` rows and ``Limits/bytes`` bytes of input (a larger row goes alone). A waiting
/// start that is cancelled leaves the queue. A value type: each transition returns what to do,
/// and its caller does it outside its lock.
struct RemoteInsertStateMachine<Start: Sendable>: Sendable {
  /// How large a batch may grow.
  struct Limits: Equatable {
    /// The most rows in one statement.
    var rows: Int
    /// The most bytes of input in one statement (a row larger than this goes alone).
    var bytes: Int
  }

  /// A start that waits to be sent.
  private struct Waiting {
    var id: UInt64
    var bytes: Int
    var start: Start
  }

  private enum State {
    /// No statement in flight.
    case idle
    /// A statement in flight; the starts that arrived since, in order.
    case sending(waiting: [Waiting])
  }

  /// What to do after ``submit(id:bytes:_:)``.
  enum SubmitAction {
    /// Send these starts now (one statement).
    case send([Start])
    /// Nothing: the start waits for the statement in flight.
    case wait
  }

  /// What to do after a statement returned (``sent()``) or a batch lost its sender (``senderLeft(rest:)``).
  enum NextAction {
    /// Send these starts now (one statement).
    case send([Start])
    /// Nothing is waiting: the next start is sent at once.
    case idle
  }

  /// What to do after ``cancel(id:)``.
  enum CancelAction {
    /// The start was waiting and left the queue: fail it as cancelled.
    case fail(Start)
    /// Nothing: the start is being sent (its outcome comes with its batch) or has its outcome.
    case none
  }

  let limits: Limits
  private var state = State.idle

  init(limits: Limits) {
    precondition(limits.rows >= 1 && limits.bytes >= 1, "a batch holds at least one row")
    self.limits = limits
  }

  /// A start arrived: `id` names it for ``cancel(id:)``, `bytes` is the size of its input.
  mutating func submit(id: UInt64, bytes: Int, _ start: Start) -> SubmitAction {
    switch state {
    case .idle:
      state = .sending(waiting: [])
      return .send([start])
    case .sending(var waiting):
      state = .idle  // Not copied on append.
      waiting.append(Waiting(id: id, bytes: bytes, start: start))
      state = .sending(waiting: waiting)
      return .wait
    }
  }

  /// The statement in flight returned (each of its starts has its outcome): the next batch, if
  /// any start waits.
  mutating func sent() -> NextAction {
    switch state {
    case .idle:
      preconditionFailure("a statement returned while none was in flight")
    case .sending(var waiting):
      guard !waiting.isEmpty else {
        state = .idle
        return .idle
      }
      state = .idle
      let count = batchCount(waiting)
      let batch = waiting.prefix(count).map(\.start)
      waiting.removeFirst(count)
      state = .sending(waiting: waiting)
      return .send(batch)
    }
  }

  /// The sender of the batch in flight left it before it returned (its task was cancelled):
  /// `rest` (the batch without the sender) is sent again by another of its starts, or, if it is
  /// empty, the statement counts as returned.
  mutating func senderLeft(rest: [Start]) -> NextAction {
    guard rest.isEmpty else {
      guard case .sending = state else { preconditionFailure("a batch lost its sender while none was in flight") }
      return .send(rest)
    }
    return sent()
  }

  /// The start `id` was cancelled.
  mutating func cancel(id: UInt64) -> CancelAction {
    guard case .sending(var waiting) = state, let index = waiting.firstIndex(where: { $0.id == id }) else {
      return .none
    }
    state = .idle
    let removed = waiting.remove(at: index)
    state = .sending(waiting: waiting)
    return .fail(removed.start)
  }

  /// The starts waiting for a statement (for tests and logs).
  var waitingCount: Int {
    guard case .sending(let waiting) = state else { return 0 }
    return waiting.count
  }

  /// How many of the first `waiting` starts fit in one batch (at least one).
  private func batchCount(_ waiting: [Waiting]) -> Int {
    var count = 0
    var bytes = 0
    for start in waiting {
      guard count < limits.rows, count == 0 || bytes + start.bytes <= limits.bytes else { break }
      count += 1
      bytes += start.bytes
    }
    return count
  }
}
