import Foundation

/// Reporting tasks that do not finish after the job cancelled them.
extension JobController {
  /// How long after the job was cancelled or failed it waits before reporting the tracked tasks
  /// that are still unfinished, or `nil` to never report them. Default 10 seconds, measured on
  /// the job's ``clock``.
  ///
  /// A stopped job always waits for every task it cancelled to actually finish, so that nothing
  /// it started outlives it. A task that ignores its cancel (a ``ConcurrentOperation`` whose
  /// ``ConcurrentOperation/operationCancelled()`` neither stops the work nor calls
  /// ``ConcurrentOperation/operationDone(error:)``, and whose work never ends) therefore keeps
  /// the job, and any group containing it, from finishing. So that such a hang is never silent,
  /// once this period passed after the stop the job reports one
  /// ``JobKitError/Code/unfinishedAfterCancel`` naming those tasks (in
  /// ``ConcurrentOperation/misuses`` and to ``JobKitDiagnostics``), and keeps waiting. Nested
  /// jobs report their own tasks, so the task at fault is named by the job that tracks it.
  ///
  /// Safe to set from any thread; it applies to stops after the change.
  public var cancellationGracePeriod: Duration? {
    get { jobState.withLock { $0.cancellationGracePeriod } }
    set { jobState.withLock { $0.cancellationGracePeriod = newValue } }
  }

  /// The job just stopped with tasks still tracked: schedules the grace period on its clock.
  func armCancellationGrace() {
    let (period, clock) = jobState.withLock { ($0.cancellationGracePeriod, $0.clock) }
    guard let period else { return }
    // Weak: a clock may hold the timer after the job finished; it must not keep the job.
    let timer = clock.schedule(after: period) { [weak self] in
      self?.reportUnfinishedAfterGrace(period)
    }
    if !jobState.withLock({ $0.graceScheduled(timer) }) {
      timer.cancel()
    }
  }

  private func reportUnfinishedAfterGrace(_ period: Duration) {
    // `isFinished` and `name` may be overridden: ask them with no lock held.
    let unfinished = jobState.withLock { $0.graceEnded() }.filter { !$0.isFinished }
    guard !unfinished.isEmpty else { return }
    let shown = unfinished.prefix(10).map { task in
      task.name.map { "\(type(of: task)) \"\($0)\"" } ?? "\(type(of: task))"
    }
    let more = unfinished.count > shown.count ? " and \(unfinished.count - shown.count) more" : ""
    reportMisuse(
      .unfinishedAfterCancel,
      "\(type(of: self)) was stopped \(period) ago and still waits for \(unfinished.count) unfinished "
        + "task(s) it cancelled: \(shown.joined(separator: ", "))\(more). A task must finish when cancelled "
        + "(override operationCancelled() to stop its work and call operationDone()); the job finishes only "
        + "once they do"
    )
  }
}
