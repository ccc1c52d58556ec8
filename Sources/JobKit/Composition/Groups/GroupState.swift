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
/// callbacks, one slot at a time (`reservePull`, then `pulled`), so the job cannot finish while
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
  mutating func start(job: inout JobState) -> [AdmissionExit] {
    isStarted = true
    return job.openAdmission()
  }

  enum Routing {
    /// Carry out the exit (the next task of a sequential group), if any; then, if `pulls`, pull
    /// from the source into the slot reserved for it.
    case proceed(AdmissionExit?, pulls: Bool)
    /// The task failed and the group stops on failure: fail the job with `error`.
    case fail(any Error)
    /// The task cancelled itself and the group propagates that: cancel the job. Its turn is not
    /// over (a sequential group starts nothing more), and no slot is reserved.
    case cancel
  }

  /// A started task was routed (in the job's per-task callback, so the job runs), with its
  /// error if it failed; `cancelledItself` if it finished cancelled without an error (the
  /// group's callbacks are not delivered once its job stops, so the group did not cancel it);
  /// `fromSource` if it was pulled from the source (its slot is free again, and reserved for the
  /// next pull if one may go).
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
      return .proceed(nil, pulls: reservePull(job: job))
    }
    return .proceed(mode == .sequential ? job.admissionDone(task) : nil, pulls: false)
  }

  // MARK: Pulling from the source

  /// In `main()` or a per-task callback: whether one more task may be pulled from the source
  /// (the group runs, the source is not exhausted, a slot is free). `true` reserves the slot,
  /// which `pulled` then fills or frees.
  mutating func reservePull(job: JobState) -> Bool {
    guard isStarted, !job.phase.isStopping, !job.phase.isFinished, var slots = source, !slots.isExhausted,
      slots.running < slots.maxRunning
    else { return false }
    slots.running += 1
    source = slots
    return true
  }

  enum Pull {
    /// Hand the task the context (the admission's shared object), then track and queue it as a
    /// source task (while the job stops, it is cancelled and waited for); then pull again.
    case start(Operation, AnyObject?)
    /// Pull no more: the source is exhausted; carry out the exits (a sequential group's added
    /// tasks may go now).
    case exhausted([AdmissionExit])
  }

  /// The task pulled into the slot `reservePull` reserved, or `nil` if the source is exhausted.
  mutating func pulled(_ task: Operation?, job: inout JobState) -> Pull {
    guard let task else {
      source?.running -= 1
      source?.isExhausted = true
      return .exhausted(mode == .sequential ? job.setAdmissionBlocked(false) : [])
    }
    return .start(task, job.admission.shared)
  }

  /// The pulled task was not tracked (the job tracks it already, or finished): its slot is free.
  mutating func pullNotTracked() {
    source?.running -= 1
  }
}
