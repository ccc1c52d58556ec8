import Foundation

/// The state of one ``CommandQueue``: its bursts (the group jobs running its commands), which one
/// takes new commands, the pause, and the failures to report when the queue drains. Changed only
/// by the pure transitions below, under the queue's lock.
struct CommandQueueState {
  /// One unfinished burst. `adding` counts `add` calls between choosing the burst and the group's
  /// `add` returning; a `cancelAll()` during one waits for it, so the command is cancelled with the
  /// burst instead of slipping past it.
  struct Burst {
    let group: GroupJob
    var adding = 0
    var cancelRequested = false
  }

  var isPaused = false
  /// Bumped by every pause and resume, so a group applies them in order (see ``GroupState/Hold``).
  var holdGeneration: UInt64 = 0
  /// The burst new commands join, if one is running and still accepting.
  var open: ObjectIdentifier?
  /// Every burst that has not finished.
  var bursts: [ObjectIdentifier: Burst] = [:]
  /// Failures of the bursts finished since the queue last drained.
  var failures: [TaskFailure] = []
  var onDrained: (@Sendable ([TaskFailure]) -> Void)?
  /// Callers of `drained()`, each waiting for the bursts that were running when it was called.
  var drainWaiters: [UInt64: DrainWait] = [:]
  var nextWaiter: UInt64 = 0

  enum DrainWait {
    /// `drained()` began but has not registered its continuation yet.
    case created
    /// Its task was cancelled before it registered.
    case cancelled
    case waiting(pending: Set<ObjectIdentifier>, CheckedContinuation<Void, Never>)
  }

  enum Claim {
    /// Add the command to this running burst.
    case join(GroupJob)
    /// No burst takes commands: make one and call `install`.
    case needsBurst
  }

  /// An `add` wants a burst to join.
  mutating func claim() -> Claim {
    guard let id = open, bursts[id] != nil else { return .needsBurst }
    bursts[id]?.adding += 1
    return .join(bursts[id]!.group)
  }

  enum Install {
    /// Another `add` installed a burst first: join that one (the fresh group is dropped unstarted).
    case join(GroupJob)
    /// `group` is now the open burst: hold it as given, add the command, then start it.
    case installed(held: Bool, generation: UInt64)
  }

  mutating func install(_ group: GroupJob) -> Install {
    if case .join(let existing) = claim() {
      return .join(existing)
    }
    let id = ObjectIdentifier(group)
    bursts[id] = Burst(group: group, adding: 1)
    open = id
    return .installed(held: isPaused, generation: holdGeneration)
  }

  /// The group's `add` returned; `accepted` is `false` if the burst had already finished taking
  /// commands. Returns the burst to cancel now, if a `cancelAll()` waited for this add.
  mutating func addReturned(to group: GroupJob, accepted: Bool) -> GroupJob? {
    let id = ObjectIdentifier(group)
    guard var burst = bursts[id] else { return nil }
    if !accepted, open == id {
      open = nil
    }
    burst.adding -= 1
    let cancelNow = burst.adding == 0 && burst.cancelRequested
    if cancelNow {
      burst.cancelRequested = false
    }
    bursts[id] = burst
    return cancelNow ? burst.group : nil
  }

  /// Pauses or resumes. Returns the generation and the bursts to apply it to.
  mutating func setPaused(_ paused: Bool) -> (generation: UInt64, groups: [GroupJob]) {
    isPaused = paused
    holdGeneration += 1
    return (holdGeneration, bursts.values.map(\.group))
  }

  /// `cancelAll()`. Returns the bursts to cancel now; those with an `add` in flight are cancelled
  /// when it returns. New commands go to a new burst.
  mutating func cancelAll() -> [GroupJob] {
    open = nil
    var now: [GroupJob] = []
    for (id, burst) in bursts {
      if burst.adding > 0 {
        bursts[id]?.cancelRequested = true
      } else {
        now.append(burst.group)
      }
    }
    return now
  }

  /// What to do once a burst finished: call the drained handler, resume `drained()` callers.
  struct BurstEnd {
    var drained: (handler: @Sendable ([TaskFailure]) -> Void, failures: [TaskFailure])?
    var waiters: [CheckedContinuation<Void, Never>] = []
  }

  /// A burst finished with `failures`. Returns the drained handler and the failures to pass it
  /// when no burst is left, and the `drained()` callers whose bursts have all finished.
  mutating func burstFinished(_ group: GroupJob, failures burstFailures: [TaskFailure]) -> BurstEnd {
    let id = ObjectIdentifier(group)
    guard bursts.removeValue(forKey: id) != nil else { return BurstEnd() }
    if open == id {
      open = nil
    }
    var end = BurstEnd()
    for (waiter, wait) in drainWaiters {
      guard case .waiting(var pending, let continuation) = wait else { continue }
      pending.remove(id)
      if pending.isEmpty {
        drainWaiters[waiter] = nil
        end.waiters.append(continuation)
      } else {
        drainWaiters[waiter] = .waiting(pending: pending, continuation)
      }
    }
    failures += burstFailures
    guard bursts.isEmpty else { return end }
    let drained = failures
    failures = []
    if let onDrained {
      end.drained = (onDrained, drained)
    }
    return end
  }

  /// A new `drained()` caller's identity.
  mutating func makeDrainWaiter() -> UInt64 {
    nextWaiter += 1
    drainWaiters[nextWaiter] = .created
    return nextWaiter
  }

  /// Registers `drained()` caller `id` to be resumed once every running burst finished. Returns
  /// `false` (registering nothing) when none runs or the caller was cancelled: resume it now.
  mutating func awaitDrain(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>) -> Bool {
    guard case .created = drainWaiters[id], !bursts.isEmpty else {
      drainWaiters[id] = nil
      return false
    }
    drainWaiters[id] = .waiting(pending: Set(bursts.keys), continuation)
    return true
  }

  /// The task of `drained()` caller `id` was cancelled. Returns its continuation to resume now,
  /// if it was waiting.
  mutating func cancelDrainWait(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
    switch drainWaiters[id] {
    case .created:
      drainWaiters[id] = .cancelled
      return nil
    case .waiting(_, let continuation):
      drainWaiters[id] = nil
      return continuation
    case .cancelled, nil:
      return nil
    }
  }
}
