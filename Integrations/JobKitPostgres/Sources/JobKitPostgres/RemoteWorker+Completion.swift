import Foundation
import JobKit
import Logging
import PostgresNIO

/// The worker's completions: handlers' outcomes are stored in batches, one fenced statement per
/// batch, by one completer task, while the claim loop goes on claiming.
extension RemoteWorker {
  /// A handler ended (or a row could not be run): frees its slot and queues its outcome for the
  /// completer; an outcome of a row handed back at shutdown is dropped without a statement.
  func handlerEnded(_ row: ClaimedRow, _ outcome: HandlerOutcome) {
    let halfBatch = halfBatch
    let (wakeClaims, store) = state.withLock { state -> (Bool, Bool) in
      guard var running = state.running[row.id], !running.finishing else { return (false, false) }
      if running.waiting {
        state.handlersWaiting -= 1
      } else {
        state.handlersRunning -= 1
      }
      let wasIsolated = state.claims.isolated == row.id
      state.claims.handlerEnded(row.id)
      let free = configuration.maxConcurrent - state.handlersRunning
      // The claim loop waits for half a batch of free slots, for no handler at all, or for the
      // end of a suspect row's handler.
      let wakeClaims = free == halfBatch || state.handlersRunning == 0 || wasIsolated
      if running.handedBack {
        state.running[row.id] = nil
        return (wakeClaims, false)
      }
      running.finishing = true
      state.running[row.id] = running
      state.outcomes.append((row, outcome))
      return (wakeClaims, true)
    }
    if store { metrics.ran(kind: row.kind, for: ContinuousClock.now - row.claimedAt) }
    if store { completions.signal() } else { drained.signal() }
    if wakeClaims { wake.signal() }
  }

  /// Stores outcomes until the worker stopped and nothing is left. A batch is stored as soon as
  /// it is full or no handler runs; otherwise after letting the handlers that are ready run
  /// once more (a yield), so that handlers ending together share a statement.
  func completeLoop(owner: String) async {
    let batch = max(1, configuration.batchSize)
    var gathered = false
    while true {
      let (outcomes, stop) = state.withLock { state -> ([(row: ClaimedRow, outcome: HandlerOutcome)], Bool) in
        guard !state.outcomes.isEmpty else { return ([], state.completerStopping) }
        guard gathered || state.outcomes.count >= batch || state.handlersRunning == 0 || state.stopping else {
          return ([], false)
        }
        defer { state.outcomes = [] }
        return (state.outcomes, false)
      }
      if stop || (outcomes.isEmpty && Task.isCancelled && state.withLock({ $0.completerStopping })) { return }
      if outcomes.isEmpty {
        if state.withLock({ !$0.outcomes.isEmpty }) {
          gathered = true
          await Task.yield()
        } else {
          // Signalled by each ended handler and by the stop.
          await completions.wait(timeout: nil)
        }
        continue
      }
      gathered = false
      for start in stride(from: 0, to: outcomes.count, by: 1_000) {
        await store(Array(outcomes[start..<min(start + 1_000, outcomes.count)]), owner: owner)
      }
    }
  }

  /// Stores `outcomes` with one fenced statement, again with backoff while the database cannot
  /// be reached (or does not answer in time), until it answers; at shutdown, until the grace
  /// period ended. Then frees the rows.
  private func store(_ outcomes: [(row: ClaimedRow, outcome: HandlerOutcome)], owner: String) async {
    let clock = ContinuousClock()
    var backoff = Backoff()
    // One warning per batch, not one per retry.
    var retried = false
    var stored: [Int64: String]?
    while stored == nil {
      do {
        stored = try await storeBatch(outcomes, owner: owner)
      } catch {
        let giveUp =
          Task.isCancelled
          || state.withLock { state in
            state.completerStopping && (state.storeDeadline.map { clock.now >= $0 } ?? true)
          }
        guard RemoteQueue.isUnreachable(error), !giveUp else {
          logger.warning(
            "could not store results; their leases will expire and the tasks run again",
            metadata: [
              "worker": "\(id)", "tasks": "\(outcomes.map(\.row.id))", "error": "\(String(reflecting: error))",
            ])
          break
        }
        let delay = backoff.next()
        logger.log(
          level: retried ? .debug : .warning, "storing results failed; retrying (fenced)",
          metadata: [
            "worker": "\(id)", "error": "\(String(reflecting: error))", "retry-in-ms": "\(Int(delay.seconds * 1000))",
          ])
        retried = true
        try? await Task.sleep(for: delay)
      }
    }
    var stale: [ClaimedRow] = []
    state.withLock { state in
      for (row, _) in outcomes {
        state.running[row.id] = nil
        guard let stored else { continue }
        switch stored[row.id] {
        case nil:
          state.statistics.stale += 1
          stale.append(row)
        case "completed": state.statistics.completed += 1
        case "cancelled": state.statistics.cancelled += 1
        default: state.statistics.failed += 1
        }
      }
    }
    if let stored {
      for (row, _) in outcomes { metrics.stored(kind: row.kind, state: stored[row.id]) }
    }
    for row in stale {
      logger.warning(
        "stale result rejected (the row is no longer this worker's)",
        metadata: ["worker": "\(id)", "task": "\(row.id)", "attempt": "\(row.attempt)"])
    }
    wake.signal()
    drained.signal()
  }

  /// One fenced update for all of `outcomes`: a row is updated only if its attempt and owner are
  /// still this run's and it is running. Returns each row's state: updated now, or found already
  /// stored by this run and attempt (an earlier try of the same batch whose answer was lost);
  /// a row missing from the answer was rejected by the fence.
  private func storeBatch(
    _ outcomes: [(row: ClaimedRow, outcome: HandlerOutcome)], owner: String
  ) async throws -> [Int64: String] {
    var ids: [Int64] = []
    var attempts: [Int32] = []
    // 0 completed, 1 failed for good, 2 failed and retryable, 3 cancelled by the handler.
    var kinds: [Int32] = []
    var codes: [String] = []
    var outputs: [ByteBuffer] = []
    var messages: [String] = []
    var delays: [Double] = []
    for (row, outcome) in outcomes {
      ids.append(row.id)
      attempts.append(Int32(row.attempt))
      switch outcome {
      case .success(let output):
        codes.append("")
        kinds.append(0)
        outputs.append(ByteBuffer(bytes: output))
        messages.append("")
        delays.append(0)
      case .failure(let code, let message, let retryable):
        codes.append(code.name)
        kinds.append(retryable ? 2 : 1)
        outputs.append(ByteBuffer())
        messages.append(message)
        delays.append(retryDelay(afterAttempt: row.attempt))
      case .cancelled:
        codes.append(RemoteTaskError.Code.cancelledWithoutRequest.name)
        kinds.append(3)
        outputs.append(ByteBuffer())
        messages.append("the handler threw CancellationError without a cancel request")
        delays.append(0)
      }
    }
    let store = StoreOutcomesStatement(
      owner: owner, ids: ids, attempts: attempts, outcomes: kinds, outputs: outputs, messages: messages,
      delays: delays, codes: codes, queue: queue.name)
    var stored: [Int64: String] = [:]
    for (id, state) in try await queue.prepared(store) {
      stored[id] = state
    }
    return stored
  }

  /// The wait before the attempt after `attempt`, as ``Configuration/retryPolicy`` says.
  func retryDelay(afterAttempt attempt: Int) -> Double {
    let policy = configuration.retryPolicy
    let base = policy.baseDelay(beforeAttempt: attempt + 1).seconds
    return policy.jitter ? base * Double.random(in: 0.5...1.5) : base
  }
}

extension RetryPolicy {
  /// This policy with the given values changed.
  func with(
    maxAttempts: Int? = nil, initialDelay: Duration? = nil, multiplier: Double? = nil, maxDelay: Duration? = nil
  ) -> RetryPolicy {
    RetryPolicy(
      maxAttempts: maxAttempts ?? self.maxAttempts, initialDelay: initialDelay ?? self.initialDelay,
      multiplier: multiplier ?? self.multiplier, maxDelay: maxDelay ?? self.maxDelay, jitter: jitter,
      retryIf: retryIf)
  }
}

/// The fenced store of a batch of outcomes (``RemoteWorker``'s completer), prepared once per
/// connection: a call of `jobkit_remote_store_outcomes` (schema version 8), whose plan probes
/// the primary key at any table size. Each row's state: updated now, or found already stored by
/// this run and attempt; a row missing from the answer was rejected by the fence. The completed
/// rows' results are notified to the queue's jobs with the store (see ``RemoteResultRouter``).
struct StoreOutcomesStatement: PostgresPreparedStatement {
  typealias Row = (Int64, String)

  static let name = "jobkit_remote_store_outcomes_2"

  static let sql = """
    SELECT stored_id, stored_state FROM jobkit_remote_store_outcomes($1, $2, $3, $4, $5, $6, $7, $8, $9)
    """

  let owner: String
  let ids: [Int64]
  let attempts: [Int32]
  /// 0 completed, 1 failed for good, 2 failed and retryable, 3 cancelled by the handler.
  let outcomes: [Int32]
  let outputs: [ByteBuffer]
  let messages: [String]
  /// The wait before the next attempt, in seconds.
  let delays: [Double]
  let codes: [String]
  /// The queue whose jobs hear the completed rows' results (`nil`: only their ids).
  let queue: String?

  func makeBindings() throws -> PostgresBindings {
    var bindings = PostgresBindings(capacity: 9)
    bindings.append(owner)
    bindings.append(ids)
    bindings.append(attempts)
    bindings.append(outcomes)
    bindings.append(outputs)
    bindings.append(messages)
    bindings.append(delays)
    bindings.append(codes)
    bindings.append(queue)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    try row.decode(Row.self)
  }
}
