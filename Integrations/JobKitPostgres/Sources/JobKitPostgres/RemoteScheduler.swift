import Foundation
import JobKit
import Logging
import PostgresNIO
import ServiceLifecycle

/// Inserts the tasks of ``RemoteSchedule``s into a queue at their ticks, as a service-lifecycle
/// `Service`; the queue's ``RemoteWorker``s run them.
///
/// ```swift
/// let scheduler = RemoteScheduler(queue: queue, schedules: [nightly, ping], logger: logger)
/// let group = ServiceGroup(services: [client, scheduler, worker], gracefulShutdownSignals: [.sigterm], logger: logger)
/// ```
///
/// - **Exactly once with any number of schedulers**: a tick's task has the key
///   ``RemoteSchedule/key(forTick:)`` (name and time), inserted with `ON CONFLICT DO NOTHING`:
///   run a scheduler in every process, each tick is inserted once.
/// - **Missed ticks are skipped**: a scheduler inserts the ticks after its start; ticks that fell
///   while no scheduler ran are not made up. A scheduler that wakes late (a paused process)
///   inserts only the latest due tick of each schedule.
/// - **Time**: ticks are wall-clock times (`now`); waits go through a `JobClock` (tests pass a
///   `ManualClock` and a `now` that follows it).
/// - A tick whose insert fails for longer than the queue's reconnect timeout is logged and
///   skipped. Graceful shutdown (or cancelling ``run()``) ends the service at once.
public final class RemoteScheduler: Service, Sendable {
  /// The queue the ticks' tasks go to.
  public let queue: RemoteQueue
  /// The schedules.
  public let schedules: [RemoteSchedule]
  let clock: any JobClock
  let now: @Sendable () -> Date
  let logger: Logger
  let inserted = Locked(0)

  /// A scheduler of `schedules` into `queue`; `clock` and `now` give its waits and the time.
  public init(
    queue: RemoteQueue, schedules: [RemoteSchedule], clock: any JobClock = DispatchJobClock(),
    now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "JobKitPostgres.RemoteScheduler")
  ) {
    self.queue = queue
    self.schedules = schedules
    self.clock = clock
    self.now = now
    self.logger = logger
  }

  /// The ticks' tasks this scheduler inserted (a tick another scheduler inserted first is not
  /// counted).
  public var insertedCount: Int { inserted.withLock { $0 } }

  /// Inserts each schedule's ticks from now on until cancelled or shut down gracefully.
  public func run() async throws {
    let start = now()
    try await cancelWhenGracefulShutdown {
      var plan = RemoteSchedulerPlan(schedules: self.schedules, start: start)
      while !Task.isCancelled {
        for (index, tick) in plan.due(at: self.now()) {
          await self.insert(self.schedules[index], tick: tick)
        }
        guard let wake = plan.nextWake() else {
          self.logger.info("no schedule has a tick to come; the scheduler waits for its shutdown")
          try await self.sleep(.seconds(86_400))
          continue
        }
        let delay = max(0, wake.timeIntervalSince(self.now()))
        try await self.sleep(.milliseconds(Int64((delay * 1000).rounded(.up))))
      }
    }
  }

  /// Inserts the task of `schedule`'s tick `tick`, unless its key has a row already.
  func insert(_ schedule: RemoteSchedule, tick: Date) async {
    let key = schedule.key(forTick: tick)
    let queue = queue
    let maxAttempts = Int32(clamping: max(1, queue.configuration.retryPolicy.maxAttempts))
    do {
      let new = try await queue.retryingWhileUnreachable {
        try await queue.statement(
          """
          INSERT INTO jobkit_remote_tasks (queue, kind, idempotency_key, input, max_attempts)
          VALUES (\(queue.name), \(schedule.kind), \(key), \(schedule.input), \(maxAttempts))
          ON CONFLICT (queue, idempotency_key) DO NOTHING RETURNING id
          """
        ) { rows in
          var new = false
          for try await _ in rows { new = true }
          return new
        }
      }
      if new {
        inserted.withLock { $0 += 1 }
        logger.debug("tick inserted", metadata: ["queue": "\(queue.name)", "key": "\(key)"])
      }
    } catch {
      if Task.isCancelled { return }
      logger.info(
        "a tick's task could not be inserted; skipped",
        metadata: ["queue": "\(queue.name)", "key": "\(key)", "error": "\(String(reflecting: error))"])
    }
  }

  /// Waits `delay` on the clock; cancelling the calling task ends the wait with `CancellationError`.
  func sleep(_ delay: Duration) async throws {
    let wait = ClockWait()
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        guard wait.attach(continuation) else { return continuation.resume() }
        let timer = clock.schedule(after: delay) { wait.end() }
        wait.hold(timer)
      }
    } onCancel: {
      wait.end()
    }
    try Task.checkCancellation()
  }
}

/// One wait on a `JobClock`: ended once, by its timer or a cancel. Only state under the lock.
final class ClockWait: Sendable {
  private struct State {
    var continuation: CheckedContinuation<Void, Never>?
    var timer: (any JobTimer)?
    var ended = false
  }

  private let state = Locked(State())

  /// Keeps the waiter; `false` if the wait already ended (then resume it at once).
  func attach(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
    state.withLock { state in
      guard !state.ended else { return false }
      state.continuation = continuation
      return true
    }
  }

  /// Keeps the timer to cancel, or cancels it if the wait already ended.
  func hold(_ timer: any JobTimer) {
    let cancel = state.withLock { state -> Bool in
      guard !state.ended else { return true }
      state.timer = timer
      return false
    }
    if cancel { timer.cancel() }
  }

  /// Ends the wait: resumes the waiter and cancels the timer, once.
  func end() {
    let (continuation, timer) = state.withLock { state -> (CheckedContinuation<Void, Never>?, (any JobTimer)?) in
      guard !state.ended else { return (nil, nil) }
      state.ended = true
      defer {
        state.continuation = nil
        state.timer = nil
      }
      return (state.continuation, state.timer)
    }
    timer?.cancel()
    continuation?.resume()
  }
}

/// Which ticks are due, as a value without a database or a clock (the time is passed in): each
/// schedule's ticks after the start, the latest only of those due together.
struct RemoteSchedulerPlan: Sendable {
  let schedules: [RemoteSchedule]
  /// Each schedule's next tick, `nil` when none comes.
  private(set) var next: [Date?]

  init(schedules: [RemoteSchedule], start: Date) {
    self.schedules = schedules
    self.next = schedules.map { $0.nextTick(after: start) }
  }

  /// The ticks due at `now` (schedule index, tick): for each schedule, its latest tick at or
  /// before `now`; the ticks before it that were missed are skipped.
  mutating func due(at now: Date) -> [(Int, Date)] {
    var due: [(Int, Date)] = []
    for index in schedules.indices {
      guard var tick = next[index], tick <= now else { continue }
      tick = schedules[index].latestTick(atOrBefore: now) ?? tick
      due.append((index, tick))
      next[index] = schedules[index].nextTick(after: tick)
    }
    return due
  }

  /// The earliest tick to come.
  func nextWake() -> Date? {
    next.compactMap { $0 }.min()
  }
}
