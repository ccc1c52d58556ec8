/// The claim loop's decisions, as a value without a database (time is passed in): how many rows
/// the next claim may take, whether it may take a suspect row (alone), and how long to look for
/// rows a claim whose answer was lost gave this worker. The worker keeps it under its lock,
/// feeds it what happened and does what ``next(handlersRunning:rowsHeld:)`` says.
///
/// - **Batches**: a claim takes at most `batchSize` rows, as many as free handler slots, and
///   keeps the rows held (running or being stored) under `maxConcurrent + batchSize`. While a
///   backlog lasts (the last claim filled its batch) and handlers run, it waits for half a batch
///   of free slots, so that claims stay batches.
/// - **Suspects run alone**: a row whose lease expired (its worker died holding it) may be the
///   one that kills its worker. It is claimed only by a worker that runs no handler, alone, and
///   that worker claims nothing else until its handler ended: if it dies again, it takes no
///   innocent row with it.
/// - **Lost claims**: a claim that failed without an answer (a lost connection, a statement past
///   its time limit) may have been applied, now or later (the server may still be running it).
///   For one lease from the failure, each heartbeat also looks up the running rows the worker
///   owns but does not know, and the claim loop runs them: they lose no attempt and wait for
///   no lease to expire. A look-up may also see the rows of a claim whose answer is on its
///   way: a row's attempt that ran in the window (its handler may have ended since) is not
///   run again.
/// - **Shutdown**: claiming, then draining (no claim; running handlers finish until the grace
///   period's end, their leases kept), then handing back what still runs, then stopped. The
///   shutdown's statements end by ``shutdownEnd`` (the grace period and ``handBackAllowance``),
///   answered or not: with the database gone, the rows left claimed come back by lease expiry.
struct RemoteWorkerClaimStateMachine: Sendable {
  /// What the claim loop does next.
  enum Action: Equatable {
    /// Wait for a free slot (a handler's end) or new rows.
    case wait
    /// Claim up to `limit` rows; `mayTakeSuspect`: no handler runs, so a suspect row may be
    /// claimed (alone).
    case claim(limit: Int, mayTakeSuspect: Bool)
    /// The worker stops: claim nothing more.
    case stop
  }

  /// Where the worker's run is.
  enum Phase: Equatable {
    case claiming
    /// Stopped claiming; running handlers may finish until `deadline`.
    case draining(deadline: ContinuousClock.Instant)
    /// The grace period ended: the rows whose handler still runs go back to the queue.
    case handingBack
    case stopped
  }

  /// What the shutdown does next.
  enum DrainAction: Equatable {
    /// Wait for running handlers (and the storing of their outcomes) until `deadline`.
    case waitForHandlers(until: ContinuousClock.Instant)
    /// Hand the rows still held back and cancel their handlers.
    case handBack
    /// Nothing is held: the shutdown is over.
    case stopped
  }

  /// What the hand-back (and the storing of the last outcomes) may take after the grace period.
  static let handBackAllowance = Duration.seconds(2)

  let batchSize: Int
  let maxConcurrent: Int
  /// The grace period's end, once a shutdown began.
  private(set) var graceEnd: ContinuousClock.Instant?
  /// The last claim filled its batch.
  private(set) var backlog = false
  /// The suspect row whose handler runs alone, if any.
  private(set) var isolated: Int64?
  /// Until then, a claim that failed without an answer may still give this worker rows.
  private(set) var lostClaimWindowEnd: ContinuousClock.Instant?
  private(set) var phase = Phase.claiming
  /// The attempts (by row) this worker ran while the window was open.
  private(set) var ranInWindow: [Int64: Int] = [:]

  init(batchSize: Int, maxConcurrent: Int) {
    self.batchSize = max(1, batchSize)
    self.maxConcurrent = max(1, maxConcurrent)
  }

  /// Free slots a claim waits for while a backlog lasts.
  var halfBatch: Int {
    max(1, min(batchSize, maxConcurrent) / 2)
  }

  /// What to do now, with `handlersRunning` handlers running and `rowsHeld` rows held (running,
  /// or with an outcome not stored yet).
  func next(handlersRunning: Int, rowsHeld: Int) -> Action {
    guard phase == .claiming else { return .stop }
    if isolated != nil { return .wait }
    let free = maxConcurrent - handlersRunning
    let room = maxConcurrent + batchSize - rowsHeld
    let limit = min(batchSize, free, room)
    guard limit > 0 else { return .wait }
    if backlog, handlersRunning > 0, limit < halfBatch { return .wait }
    return .claim(limit: limit, mayTakeSuspect: handlersRunning == 0)
  }

  /// A claim of up to `limit` rows answered with `rows` (their ids and whether each is suspect).
  mutating func claimed(_ rows: [(id: Int64, suspect: Bool)], limit: Int) {
    backlog = rows.count == limit
    if let suspect = rows.first(where: { $0.suspect }) {
      isolated = suspect.id
      backlog = false
    }
  }

  /// A claim failed at `now`. `mayHaveBeenApplied`: it failed for want of an answer (the
  /// server may apply it, until the rows' lease ends); a claim the server refused took nothing.
  mutating func claimFailed(mayHaveBeenApplied: Bool, now: ContinuousClock.Instant, lease: Duration) {
    guard mayHaveBeenApplied else { return }
    lostClaimWindowEnd = now + lease
  }

  /// Whether a heartbeat at `now` looks for rows of a lost claim.
  mutating func looksForLostRows(now: ContinuousClock.Instant) -> Bool {
    guard let end = lostClaimWindowEnd else { return false }
    if now < end { return true }
    lostClaimWindowEnd = nil
    ranInWindow = [:]
    return false
  }

  /// The handler of row `id`'s `attempt` starts.
  mutating func runs(_ id: Int64, attempt: Int) {
    if lostClaimWindowEnd != nil { ranInWindow[id] = attempt }
  }

  /// Whether a row a look-up found (``adopted(_:)``) is to run: not if its attempt ran already.
  func mayRunAdopted(_ id: Int64, attempt: Int) -> Bool {
    ranInWindow[id] != attempt
  }

  /// Rows of a lost claim were found: they run now (a suspect among them alone, if it can).
  mutating func adopted(_ rows: [(id: Int64, suspect: Bool)]) {
    if isolated == nil, let suspect = rows.first(where: { $0.suspect }) {
      isolated = suspect.id
    }
  }

  /// The handler of row `id` ended: a suspect row's end frees the worker for other rows.
  mutating func handlerEnded(_ id: Int64) {
    if isolated == id { isolated = nil }
  }

  /// A shutdown began at `now`: no more claims; handlers may run for `grace`.
  mutating func stop(now: ContinuousClock.Instant, grace: Duration) {
    guard phase == .claiming else { return }
    phase = .draining(deadline: now + grace)
    graceEnd = now + grace
  }

  /// When the shutdown ends at the latest: what is not handed back or stored by then is left
  /// to lease expiry. `nil` while claiming.
  var shutdownEnd: ContinuousClock.Instant? {
    graceEnd.map { $0 + Self.handBackAllowance }
  }

  /// The time limit of the hand-back statement sent at `now`: what is left until
  /// ``shutdownEnd``, at most `statementTimeout`; `nil` when nothing is left (the rows are left
  /// to lease expiry, without a statement).
  func handBackTimeLimit(now: ContinuousClock.Instant, statementTimeout: Duration) -> Duration? {
    guard let end = shutdownEnd else { return statementTimeout }
    guard end > now else { return nil }
    return min(statementTimeout, end - now)
  }

  /// The shutdown's next step at `now`, with `rowsHeld` rows held (handlers running, or their
  /// outcomes not stored yet).
  mutating func drain(now: ContinuousClock.Instant, rowsHeld: Int) -> DrainAction {
    switch phase {
    case .claiming:
      phase = .draining(deadline: now)
      graceEnd = now
      return drain(now: now, rowsHeld: rowsHeld)
    case .draining(let deadline):
      if rowsHeld == 0 {
        phase = .stopped
        return .stopped
      }
      if now < deadline { return .waitForHandlers(until: deadline) }
      phase = .handingBack
      return .handBack
    case .handingBack:
      return .handBack
    case .stopped:
      return .stopped
    }
  }

  /// The rows were handed back (or could not be): the shutdown is over.
  mutating func handedBack() {
    phase = .stopped
  }
}
