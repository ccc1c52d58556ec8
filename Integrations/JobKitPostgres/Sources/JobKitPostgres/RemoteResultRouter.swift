import Foundation
import Logging
import PostgresNIO

/// Hands each waiting ``RemoteWork`` its row once the row is final.
///
/// While anyone waits, one driver task runs: it keeps one `LISTEN` connection on the queue's
/// "done" channel (reconnecting with backoff when it drops) and looks up the final rows among the
/// waited ids whenever a notification names one, when a waiter registers, after each
/// (re)connection and every poll interval (notifications sent while the connection was down are
/// lost). It ends one poll interval after the last waiter left, so that consecutive waits share
/// one `LISTEN`. While the database cannot be reached, look-ups are retried with backoff; after
/// the queue's `reconnectTimeout` without a successful one, every waiter fails with
/// ``RemoteQueueError``. Waiters are resumed outside the lock.
final class RemoteResultRouter: Sendable {
  private typealias Waiter = (token: UInt64, continuation: CheckedContinuation<RemoteRow, any Error>)

  private struct State {
    var waiters: [Int64: [Waiter]] = [:]
    var nextToken: UInt64 = 0
    /// Ids to look up at the next pass (notified or just registered).
    var toCheck: Set<Int64> = []
    /// Every waited id is looked up at the next pass.
    var checkAll = false
    var driverRunning = false
    /// When the last waiter left (the driver lingers a poll interval).
    var idleSince: ContinuousClock.Instant?
  }

  /// What the driver does next.
  private enum Pass {
    case lookUp([Int64])
    case stop
  }

  private let state = Locked(State())
  private let wake = WakeSignal()
  private let logger: Logger

  init(logger: Logger) {
    self.logger = logger
  }

  /// Suspends until row `id` is final and returns it. Cancelling the calling task throws
  /// `CancellationError` at once.
  func wait(for id: Int64, queue: RemoteQueue) async throws -> RemoteRow {
    let token = state.withLock { state -> UInt64 in
      state.nextToken += 1
      return state.nextToken
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<RemoteRow, any Error>) in
        let startDriver = state.withLock { state -> Bool in
          state.waiters[id, default: []].append((token, continuation))
          state.toCheck.insert(id)
          guard !state.driverRunning else { return false }
          state.driverRunning = true
          return true
        }
        if startDriver {
          Task { await self.drive(queue) }
        }
        wake.signal()
        if Task.isCancelled { cancelWaiter(id: id, token: token) }
      }
    } onCancel: {
      cancelWaiter(id: id, token: token)
    }
  }

  private func cancelWaiter(id: Int64, token: UInt64) {
    let waiter = state.withLock { state -> Waiter? in
      guard var list = state.waiters[id], let index = list.firstIndex(where: { $0.token == token }) else { return nil }
      let waiter = list.remove(at: index)
      state.waiters[id] = list.isEmpty ? nil : list
      return waiter
    }
    waiter?.continuation.resume(throwing: CancellationError())
  }

  /// The ids to look up now, or `.stop` once nobody waited for `linger` (the driver then ends).
  private func nextPass(fullCheckDue: Bool, now: ContinuousClock.Instant, linger: Duration) -> Pass {
    state.withLock { state -> Pass in
      guard !state.waiters.isEmpty else {
        state.toCheck = []
        state.checkAll = false
        let since = state.idleSince ?? now
        state.idleSince = since
        guard now - since >= linger else { return .lookUp([]) }
        state.driverRunning = false
        state.idleSince = nil
        return .stop
      }
      state.idleSince = nil
      let ids: [Int64]
      if state.checkAll || fullCheckDue {
        ids = Array(state.waiters.keys)
      } else {
        ids = state.toCheck.filter { state.waiters[$0] != nil }
      }
      state.checkAll = false
      state.toCheck = []
      return .lookUp(ids)
    }
  }

  /// Fails every waiter with `error` (the database stayed unreachable).
  private func failAll(_ error: any Error) {
    let waiters = state.withLock { state -> [Waiter] in
      defer { state.waiters = [:] }
      return state.waiters.values.flatMap { $0 }
    }
    for waiter in waiters {
      waiter.continuation.resume(throwing: error)
    }
  }

  private func deliver(_ rows: [(Int64, RemoteRow)]) {
    var resumptions: [(CheckedContinuation<RemoteRow, any Error>, RemoteRow)] = []
    state.withLock { state in
      for (id, row) in rows {
        for waiter in state.waiters.removeValue(forKey: id) ?? [] {
          resumptions.append((waiter.continuation, row))
        }
      }
    }
    for (continuation, row) in resumptions {
      continuation.resume(returning: row)
    }
  }

  private func drive(_ queue: RemoteQueue) async {
    let listener = Task { await listen(queue) }
    defer { listener.cancel() }
    let pollInterval = queue.configuration.pollInterval
    let clock = ContinuousClock()
    var lastFullCheck = clock.now
    var lastReached = clock.now
    var backoff = Backoff()
    while true {
      let now = clock.now
      let fullCheckDue = now - lastFullCheck >= pollInterval
      guard case .lookUp(let ids) = nextPass(fullCheckDue: fullCheckDue, now: now, linger: pollInterval) else {
        return
      }
      if fullCheckDue { lastFullCheck = now }
      var wait = pollInterval
      if !ids.isEmpty {
        do {
          for start in stride(from: 0, to: ids.count, by: 5_000) {
            deliver(try await queue.finalRows(among: Array(ids[start..<min(start + 5_000, ids.count)])))
          }
          lastReached = clock.now
          backoff.reset()
        } catch {
          state.withLock { $0.checkAll = true }
          let unreachableFor = clock.now - lastReached
          if RemoteQueue.isUnreachable(error) && unreachableFor >= queue.configuration.reconnectTimeout {
            logger.error(
              "jobkit-postgres: the database stayed unreachable; failing the waiting tasks",
              metadata: ["queue": "\(queue.name)", "error": "\(String(reflecting: error))"])
            failAll(
              RemoteQueueError(
                .databaseUnreachable,
                message:
                  "queue '\(queue.name)': the database could not be reached for \(Int(unreachableFor.seconds)) s "
                  + "(reconnectTimeout); last error: \(RemoteQueue.summary(error))"))
            lastReached = clock.now
            continue
          }
          wait = backoff.next()
          logger.warning(
            "jobkit-postgres: looking up results failed; retrying",
            metadata: [
              "queue": "\(queue.name)", "error": "\(String(reflecting: error))",
              "retry-in-ms": "\(Int(wait.seconds * 1000))",
            ])
        }
      }
      await wake.wait(timeout: wait)
    }
  }

  private func listen(_ queue: RemoteQueue) async {
    await queue.listen(done: true, logger: logger) {
      // Listening now: anything that finished before is found by a full look-up.
      state.withLock { $0.checkAll = true }
      wake.signal()
    } onNotification: { payload in
      guard let id = Int64(payload) else { return }
      state.withLock { state in
        if state.waiters[id] != nil { state.toCheck.insert(id) }
      }
      wake.signal()
    }
  }
}
