import Foundation

/// The tasks of one dynamic type ("group") in a job: how many are unfinished and the group's own
/// completion handler. Only touched under the job's lock.
final class TaskTypeEntry: @unchecked Sendable {
  // @unchecked Sendable: every mutable field is guarded by the owning job's lock.
  let type: Operation.Type
  /// The group's name for events and failures (the type's name), made once.
  private(set) lazy var name = String(describing: type)
  /// The group's counts and limits, as one stored value (the accessors below forward to it).
  struct Counts {
    var unfinished = 0
    /// Whether the job ever tracked a task of this group (a limit on a group that never did is
    /// reported when the job finishes).
    var hasTracked = false
    /// At most this many of the group's job-queued tasks execute at once (`nil`: no limit).
    var limit: Int?
    /// How many of the group's tasks hold a slot.
    var running = 0
    /// Tasks per second, as a token bucket (`nil`: no rate limit). Combines with `limit`: a
    /// task is admitted only with a slot and a token.
    var rate: RateLimit?
    /// How many tasks may wait behind the limits (`nil`: no bound), and who waits for room.
    var bound: QueueBound?
  }

  // Exclusivity unchecked: only touched under the job's lock, for every task.
  @exclusivity(unchecked) private var counts = Counts()

  private(set) var unfinished: Int {
    get { counts.unfinished }
    set { counts.unfinished = newValue }
  }
  private(set) var hasTracked: Bool {
    get { counts.hasTracked }
    set { counts.hasTracked = newValue }
  }
  private(set) var limit: Int? {
    get { counts.limit }
    set { counts.limit = newValue }
  }
  private(set) var running: Int {
    get { counts.running }
    set { counts.running = newValue }
  }
  private(set) var rate: RateLimit? {
    _read { yield counts.rate }
    _modify { yield &counts.rate }
  }
  private(set) var bound: QueueBound? {
    _read { yield counts.bound }
    _modify { yield &counts.bound }
  }
  private(set) var handler: (@Sendable () -> Void)?
  /// Where the group's line of tasks waiting for a slot is in its job's admission
  /// (`JobAdmission`): set when a task of the group first waits for one.
  private(set) var slotLine: Int?

  /// Sets the group's handler. Returns the one it replaces, for the caller to release after the
  /// lock (it may hold the last reference to a user's object).
  func replaceHandler(with handler: @escaping @Sendable () -> Void) -> (@Sendable () -> Void)? {
    let replaced = self.handler
    self.handler = handler
    return replaced
  }

  /// Gives `node` (unfinished, not in line) a free slot: it counts as one of the group's
  /// running tasks until it finishes.
  func giveSlot(to node: TaskNode) {
    if node.takeSlot() {
      running += 1
    }
  }

  /// Whether a task may be admitted now: a slot is free (or there is no limit) and the rate
  /// limit, if any, has a token.
  var hasRoom: Bool {
    if let limit, running >= limit { return false }
    return rate?.hasToken ?? true
  }

  init(type: Operation.Type) {
    self.type = type
  }
}

// MARK: - The entry's transitions

/// The only writers of an entry's counts and limits, each called under its job's lock.
extension TaskTypeEntry {
  /// A task of the group is tracked (`TaskRegistry.insert`).
  func tracked() {
    unfinished += 1
    hasTracked = true
  }

  /// A task of the group is no longer tracked. Returns `true` if it was the group's last.
  func untracked() -> Bool {
    unfinished -= 1
    return unfinished == 0
  }

  func setLimit(_ limit: Int) { self.limit = limit }

  /// The group's line of tasks waiting for a slot is the admission's line `index`.
  func joinSlotLine(_ index: Int) { slotLine = index }

  /// A task that waited in the group's line takes a slot, and a token of the rate limit.
  func admitted() {
    running += 1
    takeToken()
  }

  /// A task that held a slot no longer runs.
  func freeSlot() { running -= 1 }

  /// An admitted task takes a token of the rate limit, if there is one.
  func takeToken() { rate?.take() }

  func setRate(tasksPerSecond: Double, burst: Int) {
    rate = RateLimit(tasksPerSecond: tasksPerSecond, burst: burst, replacing: rate)
  }

  /// A stop drops the rate limit.
  func dropRate() { rate = nil }

  /// The refill timer fired: a token back.
  func refillToken() { rate?.refill() }

  /// Whether the bucket needs its refill timer now (none runs, and a token is missing, or
  /// tasks `waiting` for one).
  func startRefill(waiting: Bool) -> Bool { rate?.startRefill(waiting: waiting) ?? false }

  func setBound(max count: Int) { bound = QueueBound(max: count, replacing: bound) }

  /// A producer waits for room. Returns its id (`nil`: no bound).
  func addProducer(_ continuation: CheckedContinuation<Bool, Never>) -> UInt64? {
    bound?.addWaiter(continuation)
  }

  /// A waiting producer was cancelled: its continuation, if not resumed.
  func removeProducer(_ id: UInt64) -> CheckedContinuation<Bool, Never>? { bound?.removeWaiter(id) }

  /// Every waiting producer, taken out to be resumed after the lock.
  func takeProducers() -> [CheckedContinuation<Bool, Never>] { bound?.takeWaiters() ?? [] }
}
