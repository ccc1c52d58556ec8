import Foundation
import JobKit
import Logging
import PostgresNIO

/// The worker's loops: claim (with the rescue of expired leases), listen, heartbeat, shutdown.
/// The claim statement is in `RemoteWorker+Claim.swift`, the prune loop in
/// `RemoteWorker+Prune.swift`.
extension RemoteWorker {
  /// A claimed row.
  struct ClaimedRow: Sendable {
    let id: Int64
    let kind: String
    let input: Data
    let attempt: Int
    let key: String
    /// Its lease expired before (its worker died holding it): it runs alone.
    var suspect = false
    /// When this worker claimed it (its run time is measured from here).
    var claimedAt = ContinuousClock.now
    /// How long ago its first attempt was claimed, by the database's clock.
    var sinceFirstStart: Duration = .zero
  }

  /// Claims rows while slots are free, as ``RemoteWorkerClaimStateMachine`` decides: batches,
  /// suspect rows alone, a look-up of the rows a lost claim gave this worker. Expired leases are
  /// rescued first, at most every `min(heartbeat, lease / 2)`.
  func claimLoop(owner: String) async {
    let clock = ContinuousClock()
    let rescueInterval = min(configuration.heartbeatInterval, configuration.leaseDuration / 2)
    let idleWait = min(configuration.pollInterval, rescueInterval)
    var lastRescue: ContinuousClock.Instant?
    var backoff = Backoff()
    // One warning per outage, not one per retry.
    var failing = false
    while !state.withLock({ $0.stopping }) && !Task.isCancelled {
      var fullBatch = false
      var claiming = false
      do {
        if lastRescue.map({ clock.now - $0 >= rescueInterval }) ?? true {
          try await rescueExpired()
          lastRescue = clock.now
        }
        let action = state.withLock { state in
          state.claims.next(
            handlersRunning: state.handlersRunning, rowsHeld: state.running.count - state.handlersWaiting)
        }
        let adopted = state.withLock { state in
          defer { state.adopted = [] }
          return state.adopted.filter { state.claims.mayRunAdopted($0.id, attempt: $0.attempt) }
        }
        for row in adopted { dispatch(row, owner: owner) }
        switch action {
        case .wait:
          await wake.wait(timeout: idleWait)
          continue
        case .stop:
          return
        case .claim(let limit, let mayTakeSuspect):
          claiming = true
          let rows = try await claim(limit: limit, mayTakeSuspect: mayTakeSuspect, owner: owner)
          state.withLock { $0.claims.claimed(rows.map { ($0.id, $0.suspect) }, limit: limit) }
          for row in rows { dispatch(row, owner: owner) }
          fullBatch = rows.count == limit
        }
        backoff.reset()
        if failing {
          failing = false
          logger.info("claiming works again", metadata: ["worker": "\(id)"])
        }
      } catch {
        if state.withLock({ $0.stopping }) || Task.isCancelled { break }
        if claiming {
          let lost = RemoteQueue.isUnreachable(error)
          let lease = configuration.leaseDuration
          state.withLock { $0.claims.claimFailed(mayHaveBeenApplied: lost, now: clock.now, lease: lease) }
        }
        let delay = backoff.next()
        logger.log(
          level: failing ? .debug : .warning, "claiming failed; retrying with backoff",
          metadata: [
            "worker": "\(id)", "error": "\(String(reflecting: error))", "retry-in-ms": "\(Int(delay.seconds * 1000))",
          ])
        failing = true
        await wake.wait(timeout: delay)
        continue
      }
      if !fullBatch {
        await wake.wait(timeout: idleWait)
      }
    }
  }

  /// Runs the claim loop; once a graceful shutdown began, ends it at the grace period's end if
  /// it still waits for a statement then (the database gone): the shutdown does not wait for
  /// a claim's time limit. A claim given up may have been applied: its rows come back when
  /// their leases expire.
  func claimUntilGraceEnds(owner: String) async {
    await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        await self.claimLoop(owner: owner)
        return true
      }
      group.addTask {
        await self.shutdownBegan.wait(timeout: nil)
        guard !Task.isCancelled, let end = self.state.withLock({ $0.claims.graceEnd }) else { return false }
        do {
          try await Task.sleep(until: end, clock: .continuous)
        } catch {
          return false
        }
        return true
      }
      // Ends with the claim loop, or at the grace end after a shutdown began.
      while let ended = await group.next(), !ended {}
      group.cancelAll()
    }
  }

  /// Free slots a claim waits for while a backlog lasts.
  var halfBatch: Int {
    max(1, min(configuration.batchSize, configuration.maxConcurrent) / 2)
  }

  /// Returns expired leases (any worker's) to the queue as suspects (they run alone), or ends
  /// their rows when no attempt is left or their job asked for a cancel. The database's clock
  /// decides what expired.
  func rescueExpired() async throws {
    let count = try await queue.statement(
      """
      WITH expired AS (
        SELECT id FROM jobkit_remote_tasks
        WHERE queue = \(queue.name) AND state = 'running' AND lease_expires_at < now()
        FOR UPDATE SKIP LOCKED
      )
      UPDATE jobkit_remote_tasks t SET
        state = CASE WHEN t.cancel_requested THEN 'cancelled'
          WHEN t.attempt >= t.max_attempts THEN 'failed' ELSE 'available' END,
        error_message = CASE WHEN t.cancel_requested THEN t.error_message
          ELSE 'the lease of attempt ' || t.attempt || ' expired (worker ' || coalesce(t.owner, '?')
            || ' stopped heartbeating)' END,
        error_code = CASE WHEN t.cancel_requested THEN t.error_code ELSE 'leaseExpired' END,
        finished_at = CASE WHEN t.cancel_requested OR t.attempt >= t.max_attempts THEN now() END,
        suspect = NOT t.cancel_requested AND t.attempt < t.max_attempts,
        owner = NULL, lease_expires_at = NULL, run_after = now()
      FROM expired WHERE t.id = expired.id
      RETURNING t.id
      """
    ) { rows in
      var count = 0
      for try await _ in rows { count += 1 }
      return count
    }
    if count > 0 {
      state.withLock { $0.statistics.rescued += count }
      logger.info("expired leases returned", metadata: ["worker": "\(id)", "rows": "\(count)"])
    }
  }

  /// The running rows `owner` (this run of the worker) holds that are not in `known`: rows of a
  /// claim whose answer was lost.
  func ownedRows(owner: String, excluding known: [Int64]) async throws -> [ClaimedRow] {
    let found = try await queue.statement(
      """
      SELECT id, kind, input, attempt, idempotency_key, suspect FROM jobkit_remote_tasks
      WHERE queue = \(queue.name) AND state = 'running' AND owner = \(owner) AND NOT (id = ANY(\(known)))
      ORDER BY id
      """
    ) { rows in
      var found: [ClaimedRow] = []
      for try await row in rows.decode((Int64, String, Data, Int32, String, Bool).self) {
        found.append(ClaimedRow(id: row.0, kind: row.1, input: row.2, attempt: Int(row.3), key: row.4, suspect: row.5))
      }
      return found
    }
    if !found.isEmpty {
      state.withLock { $0.statistics.claimed += found.count }
    }
    return found
  }

  /// Starts the handler of a claimed row as a task of the worker's job, or fails the row if its
  /// kind has no handler here.
  func dispatch(_ row: ClaimedRow, owner: String) {
    var context = RemoteTaskContext(attempt: row.attempt, taskID: row.id, idempotencyKey: row.key, workerID: id)
    context.sinceFirstStart = row.sinceFirstStart
    // A row already held (a lost claim's row, found twice) runs once. Only the claim loop
    // dispatches, so the look-up and the insert below do not race.
    if state.withLock({ $0.running[row.id] != nil }) { return }
    let scope = makeScope(for: row)
    let (task, setLimit) = state.withLock { state -> (Work<HandlerOutcome>?, (@Sendable () -> Void)?) in
      guard let registration = state.registrations[row.kind] else { return (nil, nil) }
      // Made under the lock: `makeTask` only builds the operation, it runs nothing.
      let task = registration.makeTask(row.input, context, scope)
      state.running[row.id] = WorkerState.Running(attempt: row.attempt, task: task, scope: scope)
      state.claims.runs(row.id, attempt: row.attempt)
      state.handlersRunning += 1
      let first = state.limitsSet.insert(row.kind).inserted
      return (task, first ? registration.setLimit : nil)
    }
    // Only the claim loop dispatches: the limit is set before the kind's first task is tracked.
    setLimit?()
    guard let task else {
      state.withLock { state in
        state.running[row.id] = WorkerState.Running(attempt: row.attempt, task: BlockOperation())
        state.handlersRunning += 1
      }
      handlerEnded(
        row,
        .failure(
          code: .noHandler,
          message: "no handler for kind '\(row.kind)' on worker \(id) (register it with RemoteWorker.register)",
          retryable: false))
      return
    }
    job.trackAndQueue(task) { finished in
      switch finished.result {
      case .success(let outcome): self.handlerEnded(row, outcome)
      case .failure, nil: self.handlerEnded(row, .cancelled)
      }
    }
  }

  /// Wakes the claim loop whenever rows become available (insert, retry, rescue, hand-back).
  func listenForWork() async {
    await queue.listen(done: false, logger: logger) {
      wake.signal()
    } onNotification: { _ in
      wake.signal()
    }
  }

  /// Extends the leases of the running rows; cancels handlers whose row asks for a cancel or is
  /// no longer this worker's.
  func heartbeatLoop(owner: String) async {
    let lease = configuration.leaseDuration.seconds
    // One warning per outage, not one per heartbeat.
    var failing = false
    while !Task.isCancelled {
      try? await Task.sleep(for: configuration.heartbeatInterval)
      // Rows whose outcome waits to be stored keep their lease too.
      let ids = state.withLock { state in
        state.running.filter { !$0.value.handedBack }.map(\.key)
      }
      guard !Task.isCancelled else { continue }
      guard !ids.isEmpty else {
        // Retried at the next heartbeat.
        try? await adoptLostRows(owner: owner)
        continue
      }
      do {
        let sent = ContinuousClock.now
        let kept = try await queue.statement(
          """
          WITH locked AS (
            SELECT id FROM jobkit_remote_tasks WHERE id = ANY(\(ids)) AND owner = \(owner) AND state = 'running'
            ORDER BY id FOR UPDATE
          )
          UPDATE jobkit_remote_tasks t SET lease_expires_at = now() + make_interval(secs => \(lease))
          FROM locked WHERE t.id = locked.id AND t.owner = \(owner) AND t.state = 'running'
          RETURNING t.id, t.cancel_requested
          """
        ) { rows in
          var kept: [Int64: Bool] = [:]
          for try await (id, cancelRequested) in rows.decode((Int64, Bool).self) {
            kept[id] = cancelRequested
          }
          return kept
        }
        // A row that finished meanwhile is not lost: only handlers still running are looked at.
        let (toCancel, lost, renewed) = state.withLock {
          state -> ([Operation], [(Int64, DurableScope?)], [DurableScope]) in
          var toCancel: [Operation] = []
          var lost: [(Int64, DurableScope?)] = []
          var renewed: [DurableScope] = []
          for id in ids {
            if kept[id] != nil, let scope = state.running[id]?.scope { renewed.append(scope) }
            guard let running = state.running[id], !running.finishing, !running.handedBack, kept[id] != false
            else { continue }
            toCancel.append(running.task)
            if kept[id] == nil { lost.append((id, running.scope)) }
          }
          return (toCancel, lost, renewed)
        }
        let heldUntil = leaseHeld(since: sent)
        for scope in renewed { scope.leaseHeld(until: heldUntil) }
        for (id, scope) in lost {
          scope?.abandon()
          logger.warning(
            "lease lost (the row was taken back); cancelling its handler",
            metadata: ["worker": "\(self.id)", "task": "\(id)"])
        }
        for task in toCancel { task.cancel() }
        try await adoptLostRows(owner: owner)
        if failing {
          failing = false
          logger.info("heartbeats work again", metadata: ["worker": "\(id)"])
        }
      } catch {
        logger.log(
          level: failing ? .debug : .warning, "heartbeat failed; retrying",
          metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
        failing = true
      }
    }
  }

  /// While a claim whose answer was lost may still give this worker rows, hands the running rows
  /// it owns but does not know to the claim loop, which runs them.
  func adoptLostRows(owner: String) async throws {
    let clock = ContinuousClock()
    let known = state.withLock { state -> [Int64]? in
      guard state.claims.looksForLostRows(now: clock.now) else { return nil }
      return Array(state.running.keys) + state.adopted.map(\.id)
    }
    guard let known else { return }
    let rows = try await ownedRows(owner: owner, excluding: known)
    guard !rows.isEmpty else { return }
    state.withLock { state in
      state.adopted += rows
      state.claims.adopted(rows.map { ($0.id, $0.suspect) })
    }
    logger.info(
      "rows of a claim whose answer was lost run now", metadata: ["worker": "\(id)", "rows": "\(rows.count)"])
    wake.signal()
  }

  /// Waits for running handlers (and the storing of their outcomes) for the grace period, then
  /// hands the rows whose handler still runs back and cancels them.
  func shutDown(owner: String) async {
    let clock = ContinuousClock()
    let now = clock.now
    let grace = Task.isCancelled ? .zero : configuration.gracePeriod
    state.withLock { state in
      state.claims.stop(now: now, grace: grace)
      state.storeDeadline = state.claims.graceEnd
    }
    completions.signal()
    while true {
      let now = clock.now
      let cancelled = Task.isCancelled
      let action = state.withLock { state in
        cancelled ? .handBack : state.claims.drain(now: now, rowsHeld: state.running.count)
      }
      guard case .waitForHandlers(let deadline) = action else { break }
      await drained.wait(timeout: min(.milliseconds(100), deadline - now))
    }
    let (ids, tasks, scopes) = state.withLock { state -> ([Int64], [Operation], [DurableScope]) in
      var ids: [Int64] = []
      var tasks: [Operation] = []
      var scopes: [DurableScope] = []
      for (id, running) in state.running where !running.handedBack && !running.finishing {
        state.running[id]?.handedBack = true
        ids.append(id)
        tasks.append(running.task)
        if let scope = running.scope { scopes.append(scope) }
      }
      return (ids, tasks, scopes)
    }
    defer {
      state.withLock { $0.claims.handedBack() }
      for task in tasks { task.cancel() }
    }
    guard !ids.isEmpty else { return }
    // Handed back, the rows run again elsewhere: their children are left to the new runs.
    for scope in scopes { scope.abandon() }
    // What is left of the grace period and the hand-back allowance, not a statement's time
    // limit: with the database gone, the rows come back when their leases expire.
    let statementTimeout = queue.configuration.statementTimeout
    let handBackStart = clock.now
    guard
      let timeLimit = state.withLock({
        $0.claims.handBackTimeLimit(now: handBackStart, statementTimeout: statementTimeout)
      })
    else {
      logger.warning(
        "no time left to hand rows back; their leases will expire",
        metadata: ["worker": "\(id)", "rows": "\(ids.count)"])
      return
    }
    do {
      let count = try await queue.statement(
        timeLimit: timeLimit,
        """
        WITH locked AS (
          SELECT id FROM jobkit_remote_tasks WHERE id = ANY(\(ids)) AND owner = \(owner) AND state = 'running'
          ORDER BY id FOR UPDATE
        )
        UPDATE jobkit_remote_tasks t SET
          state = CASE WHEN t.cancel_requested THEN 'cancelled' ELSE 'available' END,
          attempt = CASE WHEN t.cancel_requested THEN t.attempt ELSE t.attempt - 1 END,
          finished_at = CASE WHEN t.cancel_requested THEN now() END,
          owner = NULL, lease_expires_at = NULL, run_after = now()
        FROM locked WHERE t.id = locked.id AND t.owner = \(owner) AND t.state = 'running'
        RETURNING t.id
        """
      ) { rows in
        var count = 0
        for try await _ in rows { count += 1 }
        return count
      }
      state.withLock { $0.statistics.handedBack += count }
      logger.info("rows handed back at shutdown", metadata: ["worker": "\(id)", "rows": "\(count)"])
    } catch {
      logger.log(
        level: Task.isCancelled ? .info : .warning, "could not hand rows back; their leases will expire",
        metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
    }
  }
}

extension Duration {
  /// The duration in seconds.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
