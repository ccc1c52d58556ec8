import Foundation

/// What a ``SequentialGroup`` or ``ConcurrentGroup`` decides beside its job's admission
/// (`JobAdmission`, which keeps the added tasks waiting and lets them go in order, one at a
/// time or all): whether a finished task stops the group, and how many tasks of its source
/// (`TaskSource`) run. Kept under the job's lock (`JobGuarded`): each transition runs in the
/// same critical section as the job's state, which it is handed (`inout JobState`), and returns
/// what the caller carries out after releasing the lock.
///
/// The group has no lifecycle of its own: it runs while its job does (`main()` opened the
/// admission, no stop), and a group's stop is its job's.
///
/// A group with a task source pulls its tasks only inside `main()` and the job's per-task
/// callbacks, one slot at a time (`reservePull`, then a `track`), so the job cannot finish while
/// a pulled task is on its way to being tracked; a sequential group's added tasks wait until
/// the source is exhausted (its admission is blocked until then).
struct GroupState {
  enum Mode {
    case sequential
    case concurrent
  }

  let mode: Mode
  /// `main()` began: the source may be pulled.
  private(set) var isStarted = false
  private(set) var stopsOnFailure = false
  /// Whether a task that cancelled itself cancels the group (`GroupJob.propagatesTaskCancellation`).
  private(set) var propagatesTaskCancellation: Bool
  /// `nil` for a group without a source.
  private(set) var source: SourceSlots?
  /// `GroupJob.onCancelled`, until the group finishes (see `GroupState+Cancellation`).
  var cancellationHandler = CancellationHandler.unset

  /// A group in `mode`; with a source if `sourceMaxRunning` is given (at least 1).
  init(mode: Mode, sourceMaxRunning: Int? = nil, propagatesTaskCancellation: Bool = false) {
    self.mode = mode
    source = sourceMaxRunning.map { SourceSlots(maxRunning: $0) }
    self.propagatesTaskCancellation = propagatesTaskCancellation
  }

  /// The job's admission for this group: in order one at a time, or all; a sequential group's
  /// added tasks wait for its source.
  func configure(_ job: inout JobState) {
    job.activateAdmission(mode == .sequential ? .oneAtATime : .all, blocked: mode == .sequential && source != nil)
  }

  /// `SequentialGroup.stopsOnFailure` was set.
  mutating func setStopsOnFailure(_ stops: Bool) {
    stopsOnFailure = stops
  }

  /// `GroupJob.propagatesTaskCancellation` was set.
  mutating func setPropagatesTaskCancellation(_ propagates: Bool) {
    propagatesTaskCancellation = propagates
  }

  // MARK: Running

  /// `main()` runs (the job cannot finish meanwhile): the admission opens.
  mutating func start(job: inout JobState) -> [TaskExit] {
    isStarted = true
    return job.openAdmission()
  }

  enum Routing {
    /// Carry out the exit (the next task of a sequential group), if any; then, if `pull` is
    /// given, pull from the source into the slot it reserved.
    case proceed(TaskExit?, pull: ReservedPull?)
    /// The task failed and the group stops on failure: fail the job with `error`.
    case fail(any Error)
    /// The task cancelled itself and the group propagates that: cancel the job. Its turn is not
    /// over (a sequential group starts nothing more), and no slot is reserved.
    case cancel
  }

  /// A started task was routed (in the job's per-task callback, so the job runs), with its
  /// error if it failed; `cancelledItself` if it finished cancelled without an error (the
  /// group's callbacks are not called once its job stops, so the group did not cancel it);
  /// `fromSource` if it was pulled from the source (its slot is free again, and reserved for
  /// the next pull if one may go).
  mutating func taskRouted(
    _ task: Operation, error: (any Error)?, cancelledItself: Bool = false, fromSource: Bool = false,
    job: inout JobState
  ) -> Routing {
    if fromSource {
      source?.running -= 1
    }
    if cancelledItself, propagatesTaskCancellation, !job.phase.isStopping {
      return .cancel
    }
    if let error, stopsOnFailure, mode == .sequential, !job.phase.isStopping {
      return .fail(error)
    }
    if fromSource {
      return .proceed(nil, pull: reservePull(job: job))
    }
    return .proceed(mode == .sequential ? job.admissionDone(task) : nil, pull: nil)
  }

  // MARK: Pulling from the source

  /// A slot reserved for one pull from the source, with what the task pulled into it is handed
  /// before it is tracked: the admission's shared object, read in the reserving critical
  /// section, so a pulled task costs no lock of its own before its `track`.
  struct ReservedPull {
    let shared: AnyObject?
    /// The reservation took the last free slot. Until a routed task frees one (and reserves it
    /// for its own pull in the same transition), no other reservation can succeed, so the
    /// puller need not ask again after tracking this slot's task.
    let isLast: Bool
  }

  /// In `main()` or a per-task callback: whether one more task may be pulled from the source
  /// (the group runs, the source is not exhausted, a slot is free). A reservation takes the
  /// slot, which a tracked task then fills or `pullNotTracked` or `sourceExhausted` frees.
  mutating func reservePull(job: JobState) -> ReservedPull? {
    guard isStarted, !job.phase.isStopping, !job.phase.isFinished, var slots = source, !slots.isExhausted,
      slots.running < slots.maxRunning
    else { return nil }
    slots.running += 1
    source = slots
    return ReservedPull(shared: job.admission.shared, isLast: slots.running == slots.maxRunning)
  }

  /// The source returned `nil` for the reserved slot: the slot is free and nothing more is
  /// pulled. Returns the exits to carry out (a sequential group's added tasks may go now).
  mutating func sourceExhausted(job: inout JobState) -> [TaskExit] {
    source?.running -= 1
    source?.isExhausted = true
    return mode == .sequential ? job.setAdmissionBlocked(false) : []
  }

  /// The pulled task was not tracked (the job tracks it already, or finished): its slot is free.
  mutating func pullNotTracked() {
    source?.running -= 1
  }
}

extension GroupState {
  /// The source of a group made with `init(taking:)`: at most `maxRunning` of its tasks are
  /// pulled and not routed yet. A sequential group's `maxRunning` is 1, and its added tasks wait
  /// until the source is exhausted.
  struct SourceSlots {
    let maxRunning: Int
    /// Tasks reserved or pulled, and not routed yet.
    var running = 0
    /// The source returned `nil`: nothing more is pulled.
    var isExhausted = false
  }
}
