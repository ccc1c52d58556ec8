import Foundation
import Logging
import PostgresNIO

/// Hands each waiting ``RemoteWork`` its row once the row is final.
///
/// While the queue's ``RemoteQueue/run()`` runs, its driver keeps one `LISTEN` connection on
/// the queue's "done" channel and looks up the waited rows as
/// `RemoteResultRouterStateMachine` decides (notified ids, a full look-up every poll interval
/// and after each reconnection, backoff while the database cannot be reached, every waiter
/// failed with ``RemoteQueueError/Code/databaseUnreachable`` after the queue's
/// `reconnectTimeout`). A worker's store notifies its completed rows' results (a notification
/// of its own, before their ids): their waiters get them with no look-up. Without a running
/// driver, each waiting task looks its row up itself every poll interval. Waiters are resumed
/// outside the lock.
final class RemoteResultRouter: Sendable {
  /// How a waiter's wait ends: its row, or "look it up yourself" (the driver stopped).
  enum Wake: Sendable {
    case row(RemoteRow)
    case poll
  }

  typealias Waiter = CheckedContinuation<Wake, any Error>

  private let machine: Locked<RemoteResultRouterStateMachine<Waiter>>
  private let nextToken = Locked<UInt64>(0)
  /// Wakes the running driver (one per run: a wait cancelled at the driver's stop ends its stream).
  private let driverWake = Locked<WakeSignal?>(nil)
  /// Cancels of rows whose job's task was cancelled, for the driver (or a polling waiter) to send.
  private let cancels = Locked<[(key: String, generation: Int32?)]>([])
  private let logger: Logger

  init(logger: Logger, pollInterval: Duration, reconnectTimeout: Duration) {
    self.logger = logger
    self.machine = Locked(.init(pollInterval: pollInterval, reconnectTimeout: reconnectTimeout))
  }

  /// Suspends until row `id` is final and returns it. Cancelling the calling task throws
  /// `CancellationError` at once.
  func wait(for id: Int64, queue: RemoteQueue) async throws -> RemoteRow {
    let token = nextToken.withLock { token -> UInt64 in
      token += 1
      return token
    }
    let wake = try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: Waiter) in
        let driven = machine.withLock { $0.register(id: id, token: token, waiter: continuation) }
        guard driven else {
          _ = machine.withLock { $0.remove(id: id, token: token) }
          continuation.resume(returning: .poll)
          return
        }
        signalDriver()
        if Task.isCancelled { cancelWaiter(id: id, token: token) }
      }
    } onCancel: {
      cancelWaiter(id: id, token: token)
    }
    switch wake {
    case .row(let row): return row
    case .poll: return try await poll(id, queue: queue)
    }
  }

  /// Asks for the row of `key` to be cancelled, from a task that is not cancelled: the driver's,
  /// or the next waiter that polls.
  func requestCancel(key: String, generation: Int32?) {
    cancels.withLock { $0.append((key, generation)) }
    signalDriver()
  }

  private func signalDriver() {
    driverWake.withLock { $0 }?.signal()
  }

  private func cancelWaiter(id: Int64, token: UInt64) {
    let waiter = machine.withLock { $0.remove(id: id, token: token) }
    waiter?.resume(throwing: CancellationError())
  }

  /// Sends the cancels asked for, each tried while the database answers; one that fails is
  /// logged and dropped (its row runs, and nobody waits for its result).
  private func sendCancels(_ queue: RemoteQueue) async {
    let pending = cancels.withLock { cancels in
      defer { cancels = [] }
      return cancels
    }
    for (key, generation) in pending {
      do {
        try await queue.retryingWhileUnreachable(for: min(.seconds(5), queue.configuration.reconnectTimeout)) {
          try await queue.requestCancel(key: key, generation: generation)
        }
      } catch {
        logger.warning(
          "could not mark a cancelled task's row",
          metadata: ["queue": "\(queue.name)", "key": "\(key)", "error": "\(String(reflecting: error))"])
      }
    }
  }

  /// Looks row `id` up every poll interval until it is final (no driver runs). Throws
  /// ``RemoteQueueError/Code/databaseUnreachable`` after `reconnectTimeout` without an answer.
  private func poll(_ id: Int64, queue: RemoteQueue) async throws -> RemoteRow {
    let clock = ContinuousClock()
    var lastReached = clock.now
    var backoff = Backoff()
    while true {
      try Task.checkCancellation()
      await sendCancels(queue)
      let wait: Duration
      do {
        if let (_, row) = try await queue.finalRows(among: [id]).first {
          return row
        }
        lastReached = clock.now
        backoff.reset()
        wait = queue.configuration.pollInterval
      } catch {
        if error is CancellationError || Task.isCancelled { throw CancellationError() }
        let unreachableFor = clock.now - lastReached
        if RemoteQueue.isUnreachable(error) && unreachableFor >= queue.configuration.reconnectTimeout {
          throw unreachableError(queue, unreachableFor: unreachableFor, error)
        }
        wait = backoff.next()
        logger.debug(
          "looking up a result failed; retrying",
          metadata: ["queue": "\(queue.name)", "error": "\(String(reflecting: error))"])
      }
      try await Task.sleep(for: wait)
    }
  }

  private func unreachableError(_ queue: RemoteQueue, unreachableFor: Duration, _ error: any Error)
    -> RemoteQueueError
  {
    RemoteQueueError(
      .databaseUnreachable,
      message: "queue '\(queue.name)': the database could not be reached for \(Int(unreachableFor.seconds)) s "
        + "(reconnectTimeout); last error: \(RemoteQueue.summary(error))")
  }

  /// The driver: listens on the queue's "done" channel and looks up the waited rows until the
  /// calling task is cancelled; then the waiters left poll their rows themselves.
  /// A second run at the same time waits for its cancel and drives nothing.
  func drive(_ queue: RemoteQueue) async {
    let clock = ContinuousClock()
    let wake = WakeSignal()
    let first = driverWake.withLock { current -> Bool in
      guard current == nil else { return false }
      current = wake
      return true
    }
    guard first else {
      while !Task.isCancelled { try? await Task.sleep(for: .seconds(3_600)) }
      return
    }
    machine.withLock { $0.driverStarted(now: clock.now) }
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await self.listen(queue, wake: wake) }
      await lookUpLoop(queue, wake: wake)
      group.cancelAll()
    }
    let left = machine.withLock { $0.driverStopped() }
    driverWake.withLock { $0 = nil }
    for waiter in left {
      waiter.resume(returning: .poll)
    }
  }

  private func lookUpLoop(_ queue: RemoteQueue, wake: WakeSignal) async {
    let clock = ContinuousClock()
    var backoff = Backoff()
    // One warning per outage, not one per retry.
    var failing = false
    while !Task.isCancelled {
      await sendCancels(queue)
      let ids = machine.withLock { $0.nextLookUp(now: clock.now) }
      var wait: Duration?
      do {
        for start in stride(from: 0, to: ids.count, by: 5_000) {
          let rows = try await queue.finalRows(among: Array(ids[start..<min(start + 5_000, ids.count)]))
          let resumptions = machine.withLock { $0.found(rows, now: clock.now) }
          for (waiter, row) in resumptions {
            waiter.resume(returning: .row(row))
          }
        }
        backoff.reset()
        if failing {
          failing = false
          logger.info("looking up results works again", metadata: ["queue": "\(queue.name)"])
        }
      } catch {
        if Task.isCancelled { break }
        let action = machine.withLock {
          $0.lookUpFailed(unreachable: RemoteQueue.isUnreachable(error), now: clock.now)
        }
        switch action {
        case .retry:
          wait = backoff.next()
          if !failing {
            logger.warning(
              "looking up results failed; retrying with backoff",
              metadata: ["queue": "\(queue.name)", "error": "\(String(reflecting: error))"])
          }
          failing = true
        case .giveUp(let waiters, let unreachableFor):
          logger.warning(
            "the database stayed unreachable; failing the waiting tasks",
            metadata: ["queue": "\(queue.name)", "error": "\(String(reflecting: error))"])
          let failure = unreachableError(queue, unreachableFor: unreachableFor, error)
          for waiter in waiters {
            waiter.resume(throwing: failure)
          }
        }
      }
      await wake.wait(timeout: wait ?? machine.withLock { $0.idleWait(now: clock.now) })
    }
  }

  private func listen(_ queue: RemoteQueue, wake: WakeSignal) async {
    await queue.listen(done: true, logger: logger) {
      machine.withLock { $0.listening() }
      wake.signal()
    } onNotification: { payload in
      if let id = Int64(payload) {
        if machine.withLock({ $0.notified(id) }) { wake.signal() }
        return
      }
      let rows = Self.completedRows(payload)
      guard !rows.isEmpty else { return }
      let resumptions = machine.withLock { $0.delivered(rows) }
      for (waiter, row) in resumptions {
        waiter.resume(returning: .row(row))
      }
    }
  }

  /// The completed rows a worker's store notified (`id:attempt:output in base64`, separated by
  /// spaces; see `jobkit_remote_store_outcomes`); an entry that does not parse is left out (its
  /// id is notified alone too, and looked up).
  static func completedRows(_ payload: String) -> [(Int64, RemoteRow)] {
    var rows: [(Int64, RemoteRow)] = []
    for entry in payload.split(separator: " ") {
      let fields = entry.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
      guard fields.count == 3, let id = Int64(fields[0]), let attempt = Int(fields[1]),
        let output = Data(base64Encoded: String(fields[2]))
      else { continue }
      rows.append((id, RemoteRow(state: "completed", output: output, message: nil, attempt: attempt)))
    }
    return rows
  }
}
