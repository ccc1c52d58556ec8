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

  /// Claims rows while slots are free. While a backlog lasts (the last claim filled its batch),
  /// a claim waits for half a batch of free slots, at most 10 ms, so that claims stay batches
  /// instead of one row per finished handler; otherwise any free slot is filled at once. Expired
  /// leases are rescued first, at most every `min(heartbeat, lease / 2)`.
  func claimLoop(owner: String) async {
    let clock = ContinuousClock()
    let rescueInterval = min(configuration.heartbeatInterval, configuration.leaseDuration / 2)
    let halfBatch = max(1, min(configuration.batchSize, configuration.maxConcurrent) / 2)
    var lastRescue: ContinuousClock.Instant?
    var backlog = false
    var shortSince: ContinuousClock.Instant?
    var failures = 0
    while !state.withLock({ $0.stopping }) && !Task.isCancelled {
      var fullBatch = false
      do {
        if lastRescue.map({ clock.now - $0 >= rescueInterval }) ?? true {
          try await rescueExpired()
          lastRescue = clock.now
        }
        let (free, idle) = state.withLock { (configuration.maxConcurrent - $0.running.count, $0.running.isEmpty) }
        if free > 0, backlog, !idle, free < halfBatch {
          let since = shortSince ?? clock.now
          shortSince = since
          let left = .milliseconds(10) - (clock.now - since)
          if left > .zero {
            await wake.wait(timeout: left)
            continue
          }
        }
        shortSince = nil
        if free > 0 {
          let limit = min(configuration.batchSize, free)
          let rows = try await claim(limit: limit, owner: owner)
          for row in rows { dispatch(row, owner: owner) }
          fullBatch = rows.count == limit
          backlog = fullBatch
        }
        failures = 0
      } catch {
        if state.withLock({ $0.stopping }) || Task.isCancelled { break }
        failures += 1
        logger.warning(
          "jobkit-postgres: claiming failed; retrying",
          metadata: ["worker": "\(id)", "error": "\(String(reflecting: error))"])
        await wake.wait(timeout: .milliseconds(min(5_000, 100 << min(failures, 6))))
        continue
      }
      if !fullBatch {
        await wake.wait(timeout: min(configuration.pollInterval, rescueInterval))
      }
    }
  }

  /// Returns expired leases (any worker's) to the queue, or ends their rows when no attempt is
  /// left or their job asked for a cancel. The database's clock decides what expired.
  func rescueExpired() async throws {
    let rows = try await queue.client.query(
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
      """, logger: logger)
    var count = 0
    for try await _ in rows { count += 1 }
    if count > 0 {
      state.withLock { $0.statistics.rescued += count }
      logger.notice("jobkit-postgres: expired leases returned", metadata: ["worker": "\(id)", "rows": "\(count)"])
    }
  }

  func claim(limit: Int, owner: String) async throws -> [ClaimedRow] {
    let lease = configuration.leaseDuration.seconds
    let rows = try await queue.client.query(
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
      """, logger: logger)
    var claimed: [ClaimedRow] = []
    for try await row in rows.decode((Int64, String, Data, Int32, String).self) {
      claimed.append(ClaimedRow(id: row.0, kind: row.1, input: row.2, attempt: Int(row.3), key: row.4))
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
      return task
    }
    guard let task else {
      state.withLock { $0.running[row.id] = WorkerState.Running(attempt: row.attempt, task: BlockOperation()) }
      let outcome = HandlerOutcome.failure(
        message: "no handler for kind '\(row.kind)' on worker \(id) (register it with RemoteWorker.register)",
        retryable: false)
      Task { await finish(row, outcome, owner: owner) }
      return
    }
    job.trackAndQueue(task) { finished in
      let outcome: HandlerOutcome
      switch finished.result {
      case .success(let value): outcome = value
      case .failure, nil: outcome = .cancelled
      }
      Task { await self.finish(row, outcome, owner: owner) }
    }
  }

  /// Stores a handler's outcome, fenced by the row's attempt and owner, then frees its slot.
  func finish(_ row: ClaimedRow, _ outcome: HandlerOutcome, owner: String) async {
    let handedBack = state.withLock { state -> Bool in
      state.running[row.id]?.finishing = true
      return state.running[row.id]?.handedBack ?? false
    }
    if !handedBack {
      do {
        let stored = try await queue.retryingWhileUnreachable {
          try await self.store(row, outcome, owner: owner)
        }
        state.withLock { state in
          switch stored {
          case nil: state.statistics.stale += 1
          case "completed": state.statistics.completed += 1
          case "cancelled": state.statistics.cancelled += 1
          default: state.statistics.failed += 1
          }
        }
        if stored == nil {
          logger.warning(
            "jobkit-postgres: stale result rejected (the row is no longer this worker's)",
            metadata: ["worker": "\(id)", "task": "\(row.id)", "attempt": "\(row.attempt)"])
        }
      } catch {
        logger.error(
          "jobkit-postgres: could not store a result; the lease will expire and the task run again",
          metadata: ["worker": "\(id)", "task": "\(row.id)", "error": "\(String(reflecting: error))"])
      }
    }
    state.withLock { _ = $0.running.removeValue(forKey: row.id) }
    wake.signal()
    drained.signal()
  }

  /// Runs the fenced update for `outcome`; returns the row's new state, `nil` if the fence
  /// rejected it.
  private func store(_ row: ClaimedRow, _ outcome: HandlerOutcome, owner: String) async throws -> String? {
    let attempt = Int32(row.attempt)
    let rows: PostgresRowSequence
    switch outcome {
    case .success(let output):
      rows = try await queue.client.query(
        """
        UPDATE jobkit_remote_tasks SET state = 'completed', output = \(output), lease_expires_at = NULL,
          finished_at = now()
        WHERE id = \(row.id) AND attempt = \(attempt) AND owner = \(owner) AND state = 'running'
        RETURNING state
        """, logger: logger)
    case .cancelled:
      rows = try await queue.client.query(
        """
        UPDATE jobkit_remote_tasks SET
          state = CASE WHEN cancel_requested THEN 'cancelled'
            WHEN attempt < max_attempts THEN 'available' ELSE 'failed' END,
          error_message = CASE WHEN cancel_requested THEN error_message
            ELSE 'the handler threw CancellationError without a cancel request' END,
          finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts THEN now() END,
          lease_expires_at = NULL, run_after = now()
        WHERE id = \(row.id) AND attempt = \(attempt) AND owner = \(owner) AND state = 'running'
        RETURNING state
        """, logger: logger)
    case .failure(let message, let retryable):
      let delay = retryDelay(afterAttempt: row.attempt)
      rows = try await queue.client.query(
        """
        UPDATE jobkit_remote_tasks SET
          state = CASE WHEN cancel_requested THEN 'cancelled'
            WHEN \(retryable) AND attempt < max_attempts THEN 'available' ELSE 'failed' END,
          error_message = \(message),
          finished_at = CASE WHEN cancel_requested OR NOT (\(retryable) AND attempt < max_attempts)
            THEN now() END,
          lease_expires_at = NULL, run_after = now() + make_interval(secs => \(delay))
        WHERE id = \(row.id) AND attempt = \(attempt) AND owner = \(owner) AND state = 'running'
        RETURNING state
        """, logger: logger)
    }
    for try await (state) in rows.decode(String.self) {
      return state
    }
    return nil
  }

  /// The wait before the attempt after `attempt`: exponential, capped, jittered by ±50%.
  func retryDelay(afterAttempt attempt: Int) -> Double {
    let base =
      configuration.retryInitialDelay.seconds * pow(max(1, configuration.retryMultiplier), Double(max(0, attempt - 1)))
    let capped = min(base, configuration.retryMaxDelay.seconds)
    return capped * Double.random(in: 0.5...1.5)
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
      let ids = state.withLock { state in
        state.running.filter { !$0.value.handedBack && !$0.value.finishing }.map(\.key)
      }
      guard !ids.isEmpty, !Task.isCancelled else { continue }
      do {
        let rows = try await queue.client.query(
          """
          UPDATE jobkit_remote_tasks SET lease_expires_at = now() + make_interval(secs => \(lease))
          WHERE id = ANY(\(ids)) AND owner = \(owner) AND state = 'running'
          RETURNING id, cancel_requested
          """, logger: logger)
        var kept: [Int64: Bool] = [:]
        for try await (id, cancelRequested) in rows.decode((Int64, Bool).self) {
          kept[id] = cancelRequested
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

  /// Waits for running handlers for the grace period, then hands the rest back and cancels them.
  func shutDown(owner: String) async {
    let clock = ContinuousClock()
    let deadline = clock.now + configuration.gracePeriod
    while !state.withLock({ $0.running.isEmpty }), clock.now < deadline {
      await drained.wait(timeout: min(.milliseconds(100), deadline - clock.now))
    }
    let (ids, tasks) = state.withLock { state -> ([Int64], [Operation]) in
      var ids: [Int64] = []
      var tasks: [Operation] = []
      for (id, running) in state.running where !running.handedBack {
        state.running[id]?.handedBack = true
        ids.append(id)
        tasks.append(running.task)
      }
      return (ids, tasks)
    }
    guard !ids.isEmpty else { return }
    do {
      let rows = try await queue.client.query(
        """
        UPDATE jobkit_remote_tasks SET state = 'available', attempt = attempt - 1, owner = NULL,
          lease_expires_at = NULL, run_after = now()
        WHERE id = ANY(\(ids)) AND owner = \(owner) AND state = 'running'
        RETURNING id
        """, logger: logger)
      var count = 0
      for try await _ in rows { count += 1 }
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
