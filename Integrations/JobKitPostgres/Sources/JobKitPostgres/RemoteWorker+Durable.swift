import Foundation

/// Durable jobs on the worker: the scope of each handler run (``DurableScope``), and the slot
/// of a handler that waits for its children. A parent waiting for its children holds no slot,
/// so a tree of durable jobs runs to its end on one worker with ``Configuration/maxConcurrent``
/// 1: its slot goes to a child while it waits, and it runs on when the wait ends, even if that
/// takes the worker over ``Configuration/maxConcurrent`` for a while. A suspect row that waits
/// for its children no longer runs alone: it survived its start.
extension RemoteWorker {
  /// The scope of row `row`'s handler run: its children's parent, its waits, and the time its
  /// earlier attempts used (the time limits of the jobs its handler makes count from its first
  /// start).
  func makeScope(for row: ClaimedRow) -> DurableScope {
    let scope = DurableScope(rowID: row.id, key: row.key, timeAlreadyUsed: row.sinceFirstStart) {
      [weak self] waiting in
      self?.handlerWaits(row.id, waiting)
    }
    scope.leaseHeld(until: leaseHeld(since: row.claimedAt))
    return scope
  }

  /// Until when a lease taken or renewed by a statement sent at `sent` is surely held: the
  /// lease less a quarter, a margin for the statement's time and clocks.
  func leaseHeld(since sent: ContinuousClock.Instant) -> ContinuousClock.Instant {
    sent + configuration.leaseDuration * 0.75
  }

  /// The handler of row `id` started (`waiting`) or ended its waits for its children: frees its
  /// slot, or takes it again.
  func handlerWaits(_ id: Int64, _ waiting: Bool) {
    let wakeClaims = state.withLock { state -> Bool in
      guard var running = state.running[id], !running.finishing, !running.handedBack, running.waiting != waiting
      else { return false }
      running.waiting = waiting
      state.running[id] = running
      if waiting {
        state.handlersRunning -= 1
        state.handlersWaiting += 1
        state.claims.handlerEnded(id)
      } else {
        state.handlersRunning += 1
        state.handlersWaiting -= 1
      }
      return waiting
    }
    if wakeClaims { wake.signal() }
  }
}
