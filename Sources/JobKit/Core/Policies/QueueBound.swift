import Foundation

/// A group's bound on waiting tasks (`JobController.setMaxQueuedTasks(_:forGroup:)`): how many
/// of its tasks may wait behind its concurrency or rate limit, and the producers waiting for
/// room (`waitForRoom(inGroup:)`). Only touched under the job's lock; continuations are handed
/// out, to be resumed after it.
struct QueueBound {
  /// At most this many of the group's tracked tasks are not running and not yet routed:
  /// waiting behind its limits, being tracked, or finished and waiting for their callbacks.
  let max: Int
  /// Producers waiting for room, resumed with `true` (look again) or `false` (the job finished).
  private var waiters = Waiters<Void, Bool>()

  init(max: Int) {
    self.max = max
  }

  /// The bound replacing `previous`: the producers waiting stay.
  init(max: Int, replacing previous: QueueBound?) {
    self.init(max: max)
    if let previous {
      waiters = previous.waiters
    }
  }

  /// Whether one more task may wait, with `queued` tasks tracked, not running and not routed.
  func hasRoom(queued: Int) -> Bool {
    queued < max
  }

  var hasWaiters: Bool { !waiters.isEmpty }

  /// Registers a producer waiting for room; returns its id (to withdraw it on cancellation).
  /// Registered at once, under the job's lock: a cancel that comes before the caller learns
  /// the id is caught by the caller's check of `Task.isCancelled` afterwards.
  mutating func addWaiter(_ continuation: CheckedContinuation<Bool, Never>) -> UInt64 {
    let id = waiters.makeWaiter()
    _ = waiters.register(id, waitingFor: (), continuation)
    return id
  }

  /// Withdraws a waiter (its task was cancelled); `nil` if it was resumed already.
  mutating func removeWaiter(_ id: UInt64) -> CheckedContinuation<Bool, Never>? {
    waiters.cancel(id)
  }

  /// Takes every waiter, oldest first: there is room (or the job finished), and each looks again.
  mutating func takeWaiters() -> [CheckedContinuation<Bool, Never>] {
    guard !waiters.isEmpty else { return [] }
    return waiters.releaseAll()
  }
}

/// Backpressure: a bound on the tasks waiting behind a group's limits, a `track` that refuses
/// at the bound, and a wait for room.
extension JobController {
  /// Lets at most `count` tasks of dynamic type `group` wait behind the group's concurrency
  /// limit (``setMaxConcurrentTasks(_:forGroup:)``) or rate limit
  /// (``setRateLimit(_:burst:forGroup:)``), as counted by ``tryTrackAndQueue(_:completion:)``,
  /// which refuses a task at the bound; ``waitForRoom(inGroup:)`` waits until there is room. A
  /// group without either limit never makes a task wait, so the bound refuses nothing. `0`: a
  /// task is accepted only when it can start at once. Other ways of tracking are not bounded
  /// (but their waiting tasks count).
  ///
  /// Safe from any thread, at any time. A negative count is reported as
  /// ``JobKitError/Code/invalidLimit`` and ignored.
  public func setMaxQueuedTasks<T: Operation>(_ count: Int, forGroup group: T.Type) {
    guard count >= 0 else {
      reportMisuse(.invalidLimit, "setMaxQueuedTasks(\(count), forGroup: \(group)) needs a count of 0 or more; ignored")
      return
    }
    withJobState { $0.setMaxQueued(count, for: group) }
  }

  /// As ``trackAndQueue(_:completion:)``, unless the task's group has as many tasks waiting as
  /// ``setMaxQueuedTasks(_:forGroup:)`` allows: then it returns `false`, and the task is not
  /// tracked, queued, started, cancelled, routed or counted in ``progress``. Returns `true` when
  /// the task was tracked (a task tracked while the job stops is cancelled, as for
  /// `trackAndQueue`).
  ///
  /// Safe from any thread, while the job runs, from its callbacks or from a producer outside
  /// it; the check and the tracking are one step under the job's lock, so concurrent producers
  /// never exceed the bound. After the job finished it returns `false` and reports
  /// ``JobKitError/Code/trackedAfterJobFinished``, as tracking does.
  @discardableResult
  public func tryTrackAndQueue<T: Operation>(_ task: T, completion: @escaping @Sendable (T) -> Void) -> Bool {
    let node = TaskNodeWithCompletion(job: self, task: task, completion: completion)
    return track(task, node: node, queue: queueOfTasks, bounded: true) != nil
  }

  /// Suspends until a task of dynamic type `group` may be tracked under the group's bound
  /// (``setMaxQueuedTasks(_:forGroup:)``), then returns `true`: a producer waits here instead of
  /// holding its tasks in memory. Returns `true` at once if there is room or no bound, and
  /// `false` if the job finished without a stop (no room will come). Room can be taken by
  /// another producer first: call ``tryTrackAndQueue(_:completion:)`` and wait again if it
  /// refuses.
  ///
  /// Run the producer as a task of the job, so the job stays open until the producer returned:
  /// a job finishes once every task it tracked finished, even while a producer outside it
  /// waits here. A `false` for a job that finished without a stop is reported as
  /// ``JobKitError/Code/producerOutlivedJob``.
  ///
  /// ```swift
  /// // The body of the producer, a task the job tracks (the whole example: <doc:ScopeControl>):
  /// for item in items {
  ///   let task = Upload(item)
  ///   while !job.tryTrackAndQueue(task, completion: { _ in }) {
  ///     guard try await job.waitForRoom(inGroup: Upload.self) else { return }
  ///   }
  /// }
  /// ```
  ///
  /// Once the job was stopped (a cancel, ``fail(_:)``, its ``timeLimit``), throws its
  /// ``ConcurrentOperation/cancellationReason`` (such as ``JobKitError/Code/timeLimitExceeded``),
  /// as ``run()`` does: a producer waiting when the job stops is woken to learn it, and a
  /// producer that is a task of the job, cancelled by the stop, gets that reason too. Throws
  /// `CancellationError` if the awaiting Swift task is cancelled while the job runs. No thread
  /// is blocked.
  public func waitForRoom<T: Operation>(inGroup group: T.Type) async throws -> Bool {
    let id = LockedBox<UInt64?>(nil)
    let room = await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let waiter = withJobState { $0.waitForRoom(in: group, continuation) }
        id.withLock { $0 = waiter }
        // Cancelled before the waiter was registered: `onCancel` found no id to withdraw.
        if let waiter, Task.isCancelled, let withdrawn = withJobState({ $0.cancelWaitForRoom(in: group, waiter) }) {
          withdrawn.resume(returning: true)
        }
      }
    } onCancel: {
      let withdrawn = id.withLock { $0 }.flatMap { waiter in
        withJobState { $0.cancelWaitForRoom(in: group, waiter) }
      }
      withdrawn?.resume(returning: true)
    }
    // A stopped job's producer learns why, as `run()` tells it, whether it waited or not.
    if let reason = cancellationReason {
      throw reason
    }
    try Task.checkCancellation()
    if !room {
      reportMisuse(
        .producerOutlivedJob,
        "waitForRoom(inGroup: \(group).self) was called in, or waited until, the job's finish; track the producer as a task of the job"
      )
    }
    return room
  }
}
