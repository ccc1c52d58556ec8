/// The result router's decisions, as a value without a database (time is passed in): which
/// waited ids to look up, who to hand a final row, when to give up on an unreachable database.
/// Generic over the waiter, so tests use plain values; the router keeps it under its lock and
/// performs the actions it returns outside it.
///
/// - **Waiting**: a waiter registers for a row id; the driver (the queue's ``RemoteQueue/run()``)
///   looks it up at its next pass. Without a driver the caller polls its own row.
/// - **Notified**: a `NOTIFY` on the "done" channel names an id: only that id is looked up; one
///   that carries completed rows (a worker's store) hands them to their waiters, no look-up.
/// - **Polling**: every poll interval, and after each (re)connection of the `LISTEN` (while it
///   was down notifications were lost), every waited id is looked up.
/// - **Reconnecting**: a look-up that failed for want of the database is retried with backoff,
///   then every waited id is looked up again.
/// - **Giving up**: after `reconnectTimeout` without a successful look-up, every waiter fails.
struct RemoteResultRouterStateMachine<Waiter> {
  /// What the driver does after a failed look-up.
  enum FailureAction {
    /// Retry after a backoff; the next look-up takes every waited id.
    case retry
    /// The database stayed unreachable for `unreachableFor`: fail these waiters.
    case giveUp([Waiter], unreachableFor: Duration)
  }

  private var waiters: [Int64: [(token: UInt64, waiter: Waiter)]] = [:]
  /// Ids to look up at the next pass (notified or just registered).
  private var toCheck: Set<Int64> = []
  /// Every waited id is looked up at the next pass.
  private var checkAll = false
  private var lastFullCheck: ContinuousClock.Instant?
  /// The last successful look-up (or the driver's start, or the last give-up).
  private var lastReached: ContinuousClock.Instant?
  /// Whether a driver runs (the queue's `run()`).
  private(set) var driverRunning = false
  let pollInterval: Duration
  let reconnectTimeout: Duration

  init(pollInterval: Duration, reconnectTimeout: Duration) {
    self.pollInterval = pollInterval
    self.reconnectTimeout = reconnectTimeout
  }

  /// Whether anyone waits.
  var isEmpty: Bool { waiters.isEmpty }

  /// `waiter` waits for row `id`. Returns whether a driver will look it up (otherwise the caller
  /// polls its row itself).
  mutating func register(id: Int64, token: UInt64, waiter: Waiter) -> Bool {
    waiters[id, default: []].append((token, waiter))
    toCheck.insert(id)
    return driverRunning
  }

  /// The waiter `token` of row `id` stops waiting (cancelled): returns it to be resumed.
  mutating func remove(id: Int64, token: UInt64) -> Waiter? {
    guard var list = waiters[id], let index = list.firstIndex(where: { $0.token == token }) else { return nil }
    let removed = list.remove(at: index)
    waiters[id] = list.isEmpty ? nil : list
    return removed.waiter
  }

  /// A driver starts at `now`: it looks up every waited id at once.
  mutating func driverStarted(now: ContinuousClock.Instant) {
    driverRunning = true
    checkAll = true
    lastReached = now
  }

  /// The driver stopped: returns the waiters, which poll their rows themselves from now on.
  mutating func driverStopped() -> [Waiter] {
    driverRunning = false
    defer {
      waiters = [:]
      toCheck = []
    }
    return waiters.values.flatMap { $0.map(\.waiter) }
  }

  /// The `LISTEN` took effect: notifications sent before were lost, so everything is looked up.
  mutating func listening() {
    checkAll = true
  }

  /// A notification named row `id`. Returns whether it is waited for (the driver wakes).
  mutating func notified(_ id: Int64) -> Bool {
    guard waiters[id] != nil else { return false }
    toCheck.insert(id)
    return true
  }

  /// A notification carried these final rows: the waiters to resume with them (their ids need
  /// no look-up).
  mutating func delivered<Row>(_ rows: [(Int64, Row)]) -> [(Waiter, Row)] {
    var resumptions: [(Waiter, Row)] = []
    for (id, row) in rows {
      for entry in waiters.removeValue(forKey: id) ?? [] {
        resumptions.append((entry.waiter, row))
      }
    }
    return resumptions
  }

  /// The ids to look up at `now`: every waited id when a full check is due (each poll interval,
  /// after a (re)connection or a failure), otherwise those notified or registered since.
  mutating func nextLookUp(now: ContinuousClock.Instant) -> [Int64] {
    let fullCheckDue = checkAll || lastFullCheck.map { now - $0 >= pollInterval } ?? true
    defer {
      toCheck = []
      checkAll = false
    }
    if fullCheckDue { lastFullCheck = now }
    guard !waiters.isEmpty else { return [] }
    if fullCheckDue { return Array(waiters.keys) }
    return toCheck.filter { waiters[$0] != nil }
  }

  /// How long the driver waits for a notification before its next full check.
  func idleWait(now: ContinuousClock.Instant) -> Duration {
    guard let lastFullCheck else { return .zero }
    return max(.zero, pollInterval - (now - lastFullCheck))
  }

  /// Rows found final at `now`: the waiters to resume with them.
  mutating func found<Row>(_ rows: [(Int64, Row)], now: ContinuousClock.Instant) -> [(Waiter, Row)] {
    lastReached = now
    var resumptions: [(Waiter, Row)] = []
    for (id, row) in rows {
      for entry in waiters.removeValue(forKey: id) ?? [] {
        resumptions.append((entry.waiter, row))
      }
    }
    return resumptions
  }

  /// A look-up failed at `now`; `unreachable`: for want of the database (otherwise the server
  /// refused it, which is retried too).
  mutating func lookUpFailed(unreachable: Bool, now: ContinuousClock.Instant) -> FailureAction {
    checkAll = true
    let since = lastReached ?? now
    lastReached = since
    let unreachableFor = now - since
    guard unreachable, unreachableFor >= reconnectTimeout else { return .retry }
    lastReached = now
    defer {
      waiters = [:]
      toCheck = []
    }
    return .giveUp(waiters.values.flatMap { $0.map(\.waiter) }, unreachableFor: unreachableFor)
  }
}

extension RemoteResultRouterStateMachine: Sendable where Waiter: Sendable {}
