import Foundation
import JobKit

/// A ``JobKit/JobClock`` that only moves when a test calls ``advance(by:)``, so retry delays and
/// timeouts fire exactly when the test says, with no real waiting.
///
/// ```swift
/// let clock = ManualClock()
/// let job = MyJob()
/// job.clock = clock
/// job.startJob()
/// #expect(await clock.waitForScheduled(1))   // the retry delay was scheduled
/// clock.advance(by: .seconds(1))              // runs the retry now, on this thread
/// try await job.run()
/// ```
///
/// Actions run on the thread that calls ``advance(by:)``, in deadline order (then scheduling
/// order), with no lock held; an action that schedules another one due within the same advance
/// sees it run in that advance too.
public final class ManualClock: JobClock, @unchecked Sendable {
  // @unchecked Sendable: every mutable field is only touched while holding `lock`.
  private struct Entry {
    let id: UInt64
    let deadline: Duration
    let action: @Sendable () -> Void
  }

  private struct Waiter {
    let count: Int
    let continuation: CheckedContinuation<Bool, Never>
  }

  private let lock = NSLock()
  private var current = Duration.zero
  private var entries: [Entry] = []
  private var nextID: UInt64 = 0
  private var scheduledTotal = 0
  private var waiters: [UInt64: Waiter] = [:]

  /// Creates a clock at time zero.
  public init() {}

  /// How far the clock was advanced since it was created.
  public var now: Duration { lock.withLock { current } }

  /// How many actions wait for their deadline (cancelled ones are removed at once).
  public var pendingCount: Int { lock.withLock { entries.count } }

  /// How many actions were ever scheduled on this clock.
  public var scheduledCount: Int { lock.withLock { scheduledTotal } }

  /// Schedules `action` at `now + delay`; see ``JobKit/JobClock/schedule(after:_:)``.
  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> any JobTimer {
    let (id, resumed): (UInt64, [CheckedContinuation<Bool, Never>]) = lock.withLock {
      nextID += 1
      entries.append(Entry(id: nextID, deadline: current + max(.zero, delay), action: action))
      scheduledTotal += 1
      return (nextID, takeSatisfiedWaiters())
    }
    for continuation in resumed {
      continuation.resume(returning: true)
    }
    return ManualTimer(clock: self, id: id)
  }

  /// Moves the clock forward by `duration` and runs every action that is due, on this thread.
  public func advance(by duration: Duration) {
    let target = lock.withLock { current + max(.zero, duration) }
    while let action = takeNextDue(until: target) {
      action()
    }
    lock.withLock { current = max(current, target) }
  }

  /// Suspends until at least `count` actions have been scheduled in all (see ``scheduledCount``),
  /// or `timeout` of real time passed (then returns `false`). Lets a test wait for the job to
  /// arm a timer before it advances the clock.
  public func waitForScheduled(_ count: Int, timeout: Duration = .seconds(30)) async -> Bool {
    let waiterID: UInt64 = lock.withLock {
      nextID += 1
      return nextID
    }
    return await withCheckedContinuation { continuation in
      let done = lock.withLock { () -> Bool in
        if scheduledTotal >= count { return true }
        waiters[waiterID] = Waiter(count: count, continuation: continuation)
        return false
      }
      if done {
        continuation.resume(returning: true)
        return
      }
      let (seconds, attoseconds) = timeout.components
      let nanoseconds = Int(min(Double(seconds) * 1e9 + Double(attoseconds) / 1e9, Double(Int.max / 2)))
      DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
        let expired = lock.withLock { waiters.removeValue(forKey: waiterID) }
        expired?.continuation.resume(returning: false)
      }
    }
  }

  fileprivate func cancel(_ id: UInt64) {
    // The action is dropped outside the lock: releasing what it captured may run deinit code.
    let removed: Entry? = lock.withLock {
      guard let index = entries.firstIndex(where: { $0.id == id }) else { return nil }
      return entries.remove(at: index)
    }
    _ = removed
  }

  private func takeNextDue(until target: Duration) -> (@Sendable () -> Void)? {
    lock.withLock {
      let due = entries.indices.filter { entries[$0].deadline <= target }
      guard let first = due.min(by: { (entries[$0].deadline, entries[$0].id) < (entries[$1].deadline, entries[$1].id) })
      else { return nil }
      let entry = entries.remove(at: first)
      current = max(current, entry.deadline)
      return entry.action
    }
  }

  private func takeSatisfiedWaiters() -> [CheckedContinuation<Bool, Never>] {
    let satisfied = waiters.filter { $0.value.count <= scheduledTotal }
    for id in satisfied.keys {
      waiters.removeValue(forKey: id)
    }
    return satisfied.values.map(\.continuation)
  }
}

/// A pending action of a ``ManualClock``.
private struct ManualTimer: JobTimer {
  let clock: ManualClock
  let id: UInt64

  func cancel() {
    clock.cancel(id)
  }
}
