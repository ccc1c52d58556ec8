import Foundation
import Logging
import PostgresNIO

/// Hands each waiting ``RemoteWork`` its row once the row is final.
///
/// While anyone waits, one driver task runs: it keeps one `LISTEN` connection on the queue's
/// "done" channel (reconnecting when it drops) and looks up the final rows among the waited ids
/// whenever a notification names one, when a waiter registers, after each (re)connection and
/// every poll interval (notifications sent while the connection was down are lost). It ends when
/// nobody waits. Waiters are resumed outside the lock.
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
  }

  private let state = Locked(State())
  private let wake = WakeSignal()
  private let client: PostgresClient
  private let logger: Logger
  private let pollInterval: Duration

  init(client: PostgresClient, logger: Logger, pollInterval: Duration) {
    self.client = client
    self.logger = logger
    self.pollInterval = pollInterval
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

  /// The ids to look up now, or `nil` when nobody waits any more (the driver then ends).
  private func nextPass(fullCheckDue: Bool) -> [Int64]? {
    state.withLock { state -> [Int64]? in
      guard !state.waiters.isEmpty else {
        state.driverRunning = false
        state.toCheck = []
        return nil
      }
      let ids: [Int64]
      if state.checkAll || fullCheckDue {
        ids = Array(state.waiters.keys)
      } else {
        ids = state.toCheck.filter { state.waiters[$0] != nil }
      }
      state.checkAll = false
      state.toCheck = []
      return ids
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
    let clock = ContinuousClock()
    var lastFullCheck = clock.now
    while true {
      let fullCheckDue = clock.now - lastFullCheck >= pollInterval
      guard let ids = nextPass(fullCheckDue: fullCheckDue) else { return }
      if fullCheckDue { lastFullCheck = clock.now }
      if !ids.isEmpty {
        do {
          for start in stride(from: 0, to: ids.count, by: 5_000) {
            deliver(try await queue.finalRows(among: Array(ids[start..<min(start + 5_000, ids.count)])))
          }
        } catch {
          logger.warning(
            "jobkit-postgres: looking up results failed; retrying",
            metadata: ["queue": "\(queue.name)", "error": "\(String(reflecting: error))"])
          state.withLock { $0.checkAll = true }
        }
      }
      await wake.wait(timeout: pollInterval)
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
