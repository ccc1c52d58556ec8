import Foundation
import JobKit
import Logging
import PostgresNIO

/// The worker's loops: claim (with the rescue of expired leases), listen, heartbeat, shutdown.
extension RemoteWorker {
  /// A claimed row.
  struct ClaimedRow: Sendable {
    let id: Int64
    let kind: String
    let input: Data
    let attempt: Int
    let key: String
  }

  /// Claims rows while slots are free. While a backlog lasts (the last claim filled its batch)
  /// and handlers run, a claim waits for half a batch of free slots (woken when a handler ends),
  /// so that claims stay batches instead of one row per finished handler; otherwise any free
  /// slot is filled at once. Rows whose outcome is being stored do not hold a slot, but the rows
  /// held stay under `maxConcurrent + batchSize`. Expired leases are rescued first, at most
  /// every `min(heartbeat, lease / 2)`.
  func claimLoop(owner: String) async {
    let clock = ContinuousClock()
    let rescueInterval = min(configuration.heartbeatInterval, configuration.leaseDuration / 2)
    let idleWait = min(configuration.pollInterval, rescueInterval)
    var lastRescue: ContinuousClock.Instant?
    var backlog = false
    var backoff = Backoff()
    while !state.withLock({ $0.stopping }) && !Task.isCancelled {
      var fullBatch = false
      do {
        if lastRescue.map({ clock.now - $0 >= rescueInterval }) ?? true {
          try await rescueExpired()
          lastRescue = clock.now
        }
        let limit = state.withLock { claimLimit($0, backlog: backlog) }
        guard limit > 0 else {
          await wake.wait(timeout: idleWait)
          continue
        }
        let rows = try await claim(limit: limit, owner: owner)
        for row in rows { dispatch(row, owner: owner) }
        fullBatch = rows.count == limit
        backlog = fullBatch
        backoff.reset()
      } catch {
        if state.withLock({ $0.stopping }) || Task.isCancelled { break }
        let delay = backoff.next()
        logger.warning(
          "jobkit-postgres: claiming failed; retrying",
          metadata: [
            "worker": "\(id)", "error": "\(String(reflecting: error))", "retry-in-ms": "\(Int(delay.seconds * 1000))",
          ])
        await wake.wait(timeout: delay)
        continue
      }
      if !fullBatch {
        await wake.wait(timeout: idleWait)
      }
    }
  }

  /// The most rows the next claim may take now; 0 to wait for free slots.
  func claimLimit(_ state: WorkerState, backlog: Bool) -> Int {
    let batch = max(1, configuration.batchSize)
    let free = configuration.maxConcurrent - state.handlersRunning
    let room = configuration.maxConcurrent + batch - state.running.count
    let limit = min(batch, free, room)
    if backlog, state.handlersRunning > 0, limit < halfBatch { return 0 }
    return max(0, limit)
  }

  /// Free slots a claim waits for while a backlog lasts.
  var halfBatch: Int {
    max(1, min(configuration.batchSize, configuration.maxConcurrent) / 2)
  }

  /// Returns expired leases (any worker's) to the queue, or ends their rows when no attempt is
  /// left or their job asked for a cancel. The database's clock decides what expired.
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
        finished_at = CASE WHEN t.cancel_requested OR t.attempt >= t.max_attempts THEN now() END,
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
      logger.notice("jobkit-postgres: expired leases returned", metadata: ["worker": "\(id)", "rows": "\(count)"])
    }
  }

  func claim(limit: Int, owner: String) async throws -> [ClaimedRow] {
    let lease = configuration.leaseDuration.seconds
    let claimed = try await queue.statement(
      """
      WITH next AS (
        SELECT id FROM jobkit_remote_tasks
        WHERE queue = \(queue.name) AND state = 'available' AND run_after <= now() AND NOT cancel_requested
        ORDER BY run_after, id LIMIT \(Int64(limit))
        FOR UPDATE SKIP LOCKED
      )
      UPDATE jobkit_remote_tasks t SET state = 'running', attempt = t.attempt + 1, owner = \(owner),
        lease_expires_at = now() + make_interval(secs => \(lease))
      FROM next WHERE t.id = next.id
      RETURNING t.id, t.kind, t.input, t.attempt, t.idempotency_key
      """
    ) { rows in
      var claimed: [ClaimedRow] = []
      for try await row in rows.decode((Int64, String, Data, Int32, String).self) {
        claimed.append(ClaimedRow(id: row.0, kind: row.1, input: row.2, attempt: Int(row.3), key: row.4))
      }
      return claimed
    }
    if !claimed.isEmpty {
      state.withLock { $0.statistics.claimed += claimed.count }
    }
    return claimed
  }

  /// Starts the handler of a claimed row as a task of the worker's job, or fails the row if its
  /// kind has no handler here.
  func dispatch(_ row: ClaimedRow, owner: String) {
    let context = RemoteTaskContext(attempt: row.attempt, taskID: row.id, idempotencyKey: row.key, workerID: id)
    let task: Work<HandlerOutcome>? = state.withLock { state in
      guard let registration = state.registrations[row.kind] else { return nil }
      // Made under the lock: `makeTask` only builds the operation, it runs nothing.
      let task = registration.makeTask(row.input, context)
      state.running[row.id] = WorkerState.Running(attempt: row.attempt, task: task)
      state.handlersRunning += 1
      return task
    }
    guard let task else {
      state.withLock { state in
        state.running[row.id] = WorkerState.Running(attempt: row.attempt, task: BlockOperation())
        state.handlersRunning += 1
      }
      handlerEnded(
        row,
        .failure(
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
    while !Task.isCancelled {
      try? await Task.sleep(for: configuration.heartbeatInterval)
      // Rows whose outcome waits to be stored keep their lease too.
      let ids = state.withLock { state in
        state.running.filter { !$0.value.handedBack }.map(\.key)
      }
      guard !ids.isEmpty, !Task.isCancelled else { continue }
      do {
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
        let (toCancel, lost) = state.withLock { state -> ([Operation], [Int64]) in
          var toCancel: [Operation] = []
          var lost: [Int64] = []
          for id in ids {
            guard let running = state.running[id], !running.finishing, !running.handedBack, kept[id] != false
            else { continue }
            toCancel.append(running.task)
            if kept[id] == nil { lost.append(id) }
          }
          return (toCancel, lost)
        }
        for id in lost {
          logger.warning(
            "jobkit-postgres: lease lost (the row was taken back); cancelling its handler",
            metadata: ["worker": "\(self.id)", "task": "\(id)"])
        }
        for task in toCancel { task.cancel() }
      } catch {
        logger.warning(
          "jobkit-postgres: heartbeat failed; retrying",
          metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
      }
    }
  }

  /// Waits for running handlers (and the storing of their outcomes) for the grace period, then
  /// hands the rows whose handler still runs back and cancels them.
  func shutDown(owner: String) async {
    let clock = ContinuousClock()
    let deadline = clock.now + configuration.gracePeriod
    state.withLock { $0.storeDeadline = deadline }
    completions.signal()
    while !state.withLock({ $0.running.isEmpty }), clock.now < deadline {
      await drained.wait(timeout: min(.milliseconds(100), deadline - clock.now))
    }
    let (ids, tasks) = state.withLock { state -> ([Int64], [Operation]) in
      var ids: [Int64] = []
      var tasks: [Operation] = []
      for (id, running) in state.running where !running.handedBack && !running.finishing {
        state.running[id]?.handedBack = true
        ids.append(id)
        tasks.append(running.task)
      }
      return (ids, tasks)
    }
    guard !ids.isEmpty else { return }
    do {
      let count = try await queue.statement(
        """
        WITH locked AS (
          SELECT id FROM jobkit_remote_tasks WHERE id = ANY(\(ids)) AND owner = \(owner) AND state = 'running'
          ORDER BY id FOR UPDATE
        )
        UPDATE jobkit_remote_tasks t SET state = 'available', attempt = t.attempt - 1, owner = NULL,
          lease_expires_at = NULL, run_after = now()
        FROM locked WHERE t.id = locked.id AND t.owner = \(owner) AND t.state = 'running'
        RETURNING t.id
        """
      ) { rows in
        var count = 0
        for try await _ in rows { count += 1 }
        return count
      }
      state.withLock { $0.statistics.handedBack += count }
      logger.notice("jobkit-postgres: rows handed back at shutdown", metadata: ["worker": "\(id)", "rows": "\(count)"])
    } catch {
      logger.error(
        "jobkit-postgres: could not hand rows back; their leases will expire",
        metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
    }
    for task in tasks { task.cancel() }
  }
}

extension Duration {
  /// The duration in seconds.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
