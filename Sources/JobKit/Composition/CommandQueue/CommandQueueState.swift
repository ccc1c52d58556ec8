import Foundation

/// The state of one ``CommandQueue``: its bursts (the group jobs running its commands), which one
/// takes new commands, which may start, the pause, and the failures to report when the queue
/// drains. Changed only by the pure transitions below, under the queue's lock.
///
/// **Add versus stop.** Whether a command is cancelled with a burst or runs is decided by the
/// burst's group, under its job's lock (an add is a track, see `GroupJob.add`): an add racing
/// `cancelAll()` is either cancelled and finished before the burst finishes, or rejected (the
/// burst's job finished), and then `add` tries the next burst. So `cancelAll()` cancels every burst at once,
/// and waits for nothing. **One burst at a time (sequential).** A burst starts only once the `add`
/// that made it returned and, in sequential mode, every older burst finished, so a command added
/// after `cancelAll()` never runs beside a cancelled one that ignores the cancel.
struct CommandQueueState {
  /// One unfinished burst.
  struct Burst {
    let group: GroupJob
    var start = Start.installing
  }

  /// When a burst starts.
  enum Start: Equatable {
    /// The `add` that made it has not returned: it starts the burst when it does (unless an
    /// older burst has not finished, in sequential mode: then the burst waits).
    case installing
    /// Sequential mode: waits for the older bursts to finish; the last of them to finish
    /// starts it.
    case waiting
    case started
  }

  /// Whether a burst waits for the older ones to finish before it starts.
  let isSequential: Bool
  /// Paused or not; each burst's admission follows it (see `JobAdmission.setPaused`).
  private var pause = StampedFlag()
  var isPaused: Bool { pause.isSet }
  /// The burst new commands join, if one is running and still accepting.
  private(set) var open: ObjectIdentifier?
  /// Every burst that has not finished, oldest first.
  private(set) var bursts: [Burst] = []
  /// Failures of the bursts finished since the last `onDrained` call.
  private(set) var failures: [TaskFailure] = []
  var onDrained: (@Sendable ([TaskFailure]) -> Void)?
  /// The `onDrained` calls handed out and not returned yet (see ``reportReturned(_:)``).
  private(set) var reporting: Set<UInt64> = []
  private(set) var nextReport: UInt64 = 0
  /// Callers of `drained()`, each waiting for the bursts that were running when it was called,
  /// then for the `onDrained` calls that report them.
  private(set) var drainWaiters = Waiters<DrainWait, Void>()

  /// What a `drained()` caller waits for.
  enum DrainWait {
    /// These bursts to finish.
    case bursts(Set<ObjectIdentifier>)
    /// Its bursts finished just now (within ``burstFinished(_:failures:)``).
    case burstsFinished
    /// These `onDrained` calls (every one begun once its bursts finished) to return.
    case reports(Set<UInt64>)
  }

  init(isSequential: Bool) {
    self.isSequential = isSequential
  }

  private func index(of group: GroupJob) -> Int? {
    bursts.firstIndex { $0.group === group }
  }

  enum Claim {
    /// Add the command to this burst.
    case join(GroupJob)
    /// No burst takes commands: make one and call `install`.
    case needsBurst
  }

  /// An `add` wants a burst to join.
  func claim() -> Claim {
    guard let id = open, let burst = bursts.first(where: { ObjectIdentifier($0.group) == id }) else {
      return .needsBurst
    }
    return .join(burst.group)
  }

  enum Install {
    /// Another `add` installed a burst first: join that one (the fresh group is dropped unstarted).
    case join(GroupJob)
    /// `group` is now the open burst: hold it as given, add the command, then call
    /// `addReturned(to:accepted:installed: true)`, which says whether to start it.
    case installed(held: Bool, generation: UInt64)
  }

  mutating func install(_ group: GroupJob) -> Install {
    if case .join(let existing) = claim() {
      return .join(existing)
    }
    bursts.append(Burst(group: group))
    open = ObjectIdentifier(group)
    return .installed(held: pause.isSet, generation: pause.generation)
  }

  /// The group's `add` returned; `accepted` is `false` if the burst had already finished taking
  /// commands (new commands then go to a new burst); `installed` if this `add` made the burst.
  /// Returns the burst to start now: the one this `add` made, unless it must wait for older
  /// bursts (sequential mode; the last of them to finish starts it).
  mutating func addReturned(to group: GroupJob, accepted: Bool, installed: Bool) -> GroupJob? {
    guard let index = index(of: group) else { return nil }
    if !accepted, open == ObjectIdentifier(group) {
      open = nil
    }
    guard installed, bursts[index].start == .installing else { return nil }
    if isSequential && index > 0 {
      bursts[index].start = .waiting
      return nil
    }
    bursts[index].start = .started
    return group
  }

  /// Pauses or resumes. Returns the generation and the bursts to apply it to.
  mutating func setPaused(_ paused: Bool) -> (generation: UInt64, groups: [GroupJob]) {
    (pause.change(to: paused), bursts.map(\.group))
  }

  /// `cancelAll()`. Returns every unfinished burst, to cancel now (an `add` racing it is decided
  /// by the burst's group: see the type's documentation). New commands go to a new burst.
  mutating func cancelAll() -> [GroupJob] {
    open = nil
    return bursts.map(\.group)
  }

  /// One `onDrained` call to make after the lock, then to confirm with ``reportReturned(_:)``.
  struct Report {
    let id: UInt64
    let handler: @Sendable ([TaskFailure]) -> Void
    let failures: [TaskFailure]
  }

  /// What to do once a burst finished: start the next burst, call the drained handler (then
  /// ``reportReturned(_:)``), resume `drained()` callers.
  struct BurstEnd {
    /// Sequential mode: the burst that waited for this one, to start now.
    var start: GroupJob?
    var report: Report?
    /// Failures of a drained queue without handler, released after the lock (they hold user values).
    var dropped: [TaskFailure] = []
    var waiters: [CheckedContinuation<Void, Never>] = []
  }

  /// A burst finished with `failures`. Returns the burst to start next (sequential mode), the
  /// `onDrained` call to make, and the `drained()` callers to resume now.
  ///
  /// **Drained means reported.** The handler is called when no burst is left (the queue
  /// drained), and also when a `drained()` caller's bursts all finished while newer ones run
  /// and failures are unreported: then with the failures so far, so that caller need not wait
  /// for the newer bursts (no starving on a busy queue). A caller whose bursts finished is
  /// resumed once every `onDrained` call begun by then returned, so when `drained()` returns,
  /// every failure of a command that finished before has been reported.
  mutating func burstFinished(_ group: GroupJob, failures burstFailures: [TaskFailure]) -> BurstEnd {
    guard let index = index(of: group) else { return BurstEnd() }
    bursts.remove(at: index)
    let id = ObjectIdentifier(group)
    if open == id {
      open = nil
    }
    var end = BurstEnd()
    if isSequential, let next = bursts.first, next.start == .waiting {
      bursts[0].start = .started
      end.start = next.group
    }
    failures += burstFailures
    var someFinished = false
    _ = drainWaiters.advance { wait in
      guard case .bursts(var pending) = wait else { return wait }
      pending.remove(id)
      guard pending.isEmpty else { return .bursts(pending) }
      someFinished = true
      return .burstsFinished
    }
    if let onDrained, bursts.isEmpty || (someFinished && !failures.isEmpty) {
      end.report = beginReport(onDrained)
    } else if bursts.isEmpty {
      end.dropped = failures  // no handler takes them
      failures = []
    }
    if someFinished {
      let reporting = self.reporting
      end.waiters = drainWaiters.advance { wait in
        guard case .burstsFinished = wait else { return wait }
        return reporting.isEmpty ? nil : .reports(reporting)
      }
    }
    return end
  }

  /// Hands the failures so far to a new `onDrained` call, recorded as begun.
  private mutating func beginReport(_ handler: @escaping @Sendable ([TaskFailure]) -> Void) -> Report {
    nextReport += 1
    reporting.insert(nextReport)
    defer { failures = [] }
    return Report(id: nextReport, handler: handler, failures: failures)
  }

  /// `onDrained` call `id` returned. Returns the `drained()` callers to resume now: those whose
  /// bursts finished and who wait for no other call.
  mutating func reportReturned(_ id: UInt64) -> [CheckedContinuation<Void, Never>] {
    reporting.remove(id)
    return drainWaiters.advance { wait in
      guard case .reports(var calls) = wait, calls.remove(id) != nil else { return wait }
      return calls.isEmpty ? nil : .reports(calls)
    }
  }

  /// A new `drained()` caller's identity.
  mutating func makeDrainWaiter() -> UInt64 {
    drainWaiters.makeWaiter()
  }

  /// Registers `drained()` caller `id` to be resumed once every running burst finished and the
  /// `onDrained` calls begun by then returned (on an idle queue: once the calls in flight
  /// returned). Returns `false` (registering nothing) when there is nothing to wait for or the
  /// caller was cancelled: resume it now.
  mutating func awaitDrain(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
    guard !bursts.isEmpty || !reporting.isEmpty else {
      drainWaiters.remove(id)
      return false
    }
    let wait = bursts.isEmpty ? DrainWait.reports(reporting) : .bursts(Set(bursts.map { ObjectIdentifier($0.group) }))
    return drainWaiters.register(id, waitingFor: wait, continuation)
  }

  /// The task of `drained()` caller `id` was cancelled. Returns its continuation to resume now,
  /// if it was waiting.
  mutating func cancelDrainWait(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
    drainWaiters.cancel(id)
  }
}
