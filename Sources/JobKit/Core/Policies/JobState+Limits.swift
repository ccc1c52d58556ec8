import Foundation

/// Per-group limits: at most `limit` of a group's job-queued tasks hold a slot at once; the rest
/// wait in their group's line, in tracking order.
///
/// One rule, whatever the phase: a slot is the only way into the queue for a job-queued task of
/// a limited group. A stop does not release the line (a task let go while the stopping thread
/// has not cancelled it yet could start beside the task holding the slot); it cancels the
/// waiting tasks, which keep their place and, once admitted, finish at once without running.
extension JobState {
  /// `node`, tracked with `waitsForSlot`, is observed now: it takes a free slot of its group if
  /// nobody waits for one (returns `true`: the caller queues it), else waits in line (`false`).
  /// Once admitted, a task that waited goes to `queue`. While the job is suspended, no slot is
  /// given: the task is held back until the resume (`JobState+Suspension.swift`).
  mutating func admitOrWait(_ node: TaskNode, queue: OperationQueue) -> Bool {
    guard node.state.isUnfinished else { return false }
    if suspension.isSuspended {
      admission.waitForResume(node, for: queue)
      return false
    }
    let group: TaskTypeEntry = node.typeEntry
    guard group.limit != nil || group.rate != nil else { return true }
    var admitted = false
    if group.hasRoom, admission.waitingForSlot(of: group) == 0 {
      group.giveSlot(to: node)
      group.takeToken()
      admitted = true
    } else {
      admission.waitForSlot(node, of: group, for: queue)
    }
    startRefillIfNeeded(of: group)
    return admitted
  }

  // MARK: Backpressure

  /// `tryTrackAndQueue` asks whether a task of `group` may be tracked: `false` when its bound
  /// is reached (nothing changes).
  func acceptUnderBound(_ group: TaskTypeEntry) -> Bool {
    guard let bound = group.bound, group.limit != nil || group.rate != nil else { return true }
    return bound.hasRoom(queued: queued(in: group)) || startsAtOnce(group)
  }

  /// `group`'s tracked tasks that hold no slot and were not routed: waiting behind its limits,
  /// being tracked, or finished and waiting for their callbacks (a task's memory is held until
  /// it is routed, so this is what the bound counts).
  private func queued(in group: TaskTypeEntry) -> Int {
    group.unfinished - group.running
  }

  /// Whether a task of `group` tracked now would start at once: a slot and a token are free and
  /// no other task is queued (a bound of 0 accepts only such a task).
  private func startsAtOnce(_ group: TaskTypeEntry) -> Bool {
    group.hasRoom && queued(in: group) == 0
  }

  /// Whether `group` has room under its bound now.
  private func hasRoomUnderBound(_ group: TaskTypeEntry) -> Bool {
    group.bound?.hasRoom(queued: queued(in: group)) == true || startsAtOnce(group)
  }

  /// Sets a group's bound on waiting tasks.
  mutating func setMaxQueued(_ count: Int, for type: Operation.Type) {
    let group = registry.group(for: type)
    group.setBound(max: count)
    wakeIfRoom(in: group)
  }

  /// A producer waits for room in `type`'s group: `nil` (and nothing registered) if there is
  /// room now, or no bound; `false` if the job finished; else the waiter's id.
  mutating func waitForRoom(in type: Operation.Type, _ continuation: CheckedContinuation<Bool, Never>)
    -> UInt64?
  {
    guard !phase.isFinished else {
      afterLockEffects.wake(continuation, room: false)
      return nil
    }
    let group = registry.group(for: type)
    guard group.bound != nil, group.limit != nil || group.rate != nil, !hasRoomUnderBound(group) else {
      afterLockEffects.wake(continuation, room: true)
      return nil
    }
    return group.addProducer(continuation)
  }

  /// The waiting producer `id` of `type`'s group was cancelled: its continuation, if not resumed.
  mutating func cancelWaitForRoom(in type: Operation.Type, _ id: UInt64) -> CheckedContinuation<Bool, Never>? {
    registry.group(for: type).removeProducer(id)
  }

  /// Room may have appeared in `group` (a task was admitted or routed, a slot freed): its
  /// waiting producers look again.
  mutating func wakeIfRoom(in group: TaskTypeEntry) {
    guard group.bound?.hasWaiters == true, hasRoomUnderBound(group) else { return }
    for waiter in group.takeProducers() {
      afterLockEffects.wake(waiter, room: true)
    }
  }

  /// The job finishes: every waiting producer is told there will be no room.
  mutating func wakeProducersForFinish(_ groups: [TaskTypeEntry]) {
    for group in groups where group.bound?.hasWaiters == true {
      for waiter in group.takeProducers() {
        afterLockEffects.wake(waiter, room: false)
      }
    }
  }

  /// Sets a group's rate limit. Returns the waiting tasks it admits, to be queued by the
  /// caller; the refill it starts is an after-lock effect (``takeAfterLockEffects()``).
  mutating func setRateLimit(tasksPerSecond: Double, burst: Int, for type: Operation.Type) -> [TaskExit] {
    let group = registry.group(for: type)
    group.setRate(tasksPerSecond: tasksPerSecond, burst: burst)
    let admitted = suspension.isSuspended ? [] : admitWaiting(of: group)
    startRefillIfNeeded(of: group)
    return admitted
  }

  /// `group`'s refill timer fired: a token back, the waiting tasks it admits (to be queued by
  /// the caller), and whether the caller schedules the next refill.
  mutating func refill(_ group: TaskTypeEntry) -> (exits: [TaskExit], again: Bool) {
    guard group.rate != nil else { return ([], false) }  // dropped by a stop
    group.refillToken()
    let admitted = suspension.isSuspended ? [] : admitWaiting(of: group)
    let again = group.startRefill(waiting: admission.waitingForSlot(of: group) > 0)
    return (admitted, again)
  }

  /// A token was taken or a task lines up: `group`'s bucket needs its refill timer if none runs.
  private mutating func startRefillIfNeeded(of group: TaskTypeEntry) {
    if group.startRefill(waiting: admission.waitingForSlot(of: group) > 0) {
      afterLockEffects.refill(group)
    }
  }

  /// A stop drops the rate limits: the tasks still waiting are cancelled and finish without
  /// running, so they need no token (a concurrency limit still holds). Returns those admitted.
  /// Producers waiting for room are woken: they learn the stop (`waitForRoom` throws the job's
  /// reason).
  mutating func dropRateLimitsForStop() -> [TaskExit] {
    var admitted: [TaskExit] = []
    for group in registry.groups.values where group.bound?.hasWaiters == true {
      for waiter in group.takeProducers() {
        afterLockEffects.wake(waiter, room: true)
      }
    }
    for group in registry.groups.values where group.rate != nil {
      group.dropRate()
      if !suspension.isSuspended {
        admitted += admitWaiting(of: group)
      }
    }
    return inTrackingOrder(admitted)
  }

  /// Sets a group's limit. Returns the waiting tasks it admits, to be queued by the caller.
  mutating func setLimit(_ limit: Int, for type: Operation.Type) -> [TaskExit] {
    let group = registry.group(for: type)
    group.setLimit(limit)
    guard !suspension.isSuspended else { return [] }
    return admitWaiting(of: group)
  }

  /// `node` stopped running (it finished, or its attempt failed): its place under the limit
  /// goes back, a slot to the next waiting tasks (returned, to be queued by the caller), or its
  /// place in the line if it never got one (someone else queued it).
  mutating func giveBack(_ release: TaskState.Release, of node: TaskNode) -> [TaskExit] {
    if let need = release.leftLine {
      admission.leave(node, need)
    }
    return release.slot ? releaseSlot(in: node.typeEntry) : []
  }

  /// A task of `group` that held a slot no longer runs (it finished, or a failed attempt waits
  /// for its retry): its slot goes back. Returns the waiting tasks admitted to it, to be queued
  /// by the caller (none while the job is suspended: the resume admits them).
  mutating func releaseSlot(in group: TaskTypeEntry) -> [TaskExit] {
    group.freeSlot()
    wakeIfRoom(in: group)
    guard !suspension.isSuspended else { return [] }
    return admitWaiting(of: group)
  }

  /// `exits`, taken from several groups' lines at once (a resume, a stop), in the order their
  /// tasks were tracked: a serial queue starts them in the order the job tracked them, whatever
  /// the order of the groups. Linear in the job's unrouted tasks; only then.
  func inTrackingOrder(_ exits: [TaskExit]) -> [TaskExit] {
    guard let first = exits.first?.node.typeEntry, exits.contains(where: { $0.node.typeEntry !== first }) else {
      return exits
    }
    var rank: [ObjectIdentifier: Int] = [:]
    rank.reserveCapacity(exits.count)
    for exit in exits {
      rank[ObjectIdentifier(exit.node)] = 0
    }
    // The registry lists the newest first: the oldest gets the lowest rank.
    var position = 0
    for node in registry.nodes where rank[ObjectIdentifier(node)] != nil {
      position -= 1
      rank[ObjectIdentifier(node)] = position
    }
    return exits.sorted { rank[ObjectIdentifier($0.node), default: 0] < rank[ObjectIdentifier($1.node), default: 0] }
  }

  /// `group`'s waiting tasks that get a free slot (and token) now: their exits, each to be queued
  /// (made under the lock, because a node's fields are only stable there).
  mutating func admitWaiting(of group: TaskTypeEntry) -> [TaskExit] {
    let admitted = admission.admitWaiting(of: group)
    if !admitted.isEmpty {
      wakeIfRoom(in: group)
    }
    return admitted.compactMap { node, queue in
      guard let task = node.task else { return nil }
      return TaskExit(node, task, to: .queue, queue: queue)
    }
  }
}
