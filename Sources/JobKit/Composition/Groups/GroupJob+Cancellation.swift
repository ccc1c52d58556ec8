import Foundation

/// A task that cancels itself cancels its group (CompositeOperations' cancellation of a
/// composite by one of its sub-operations), and the group's cancellation handler.
extension GroupJob {
  /// Called once when a cancel stopped the group, instead of the group finishing normally:
  /// CompositeOperations' `cancellationHandler`. `nil` by default.
  ///
  /// A cancel stops the group when it comes first, before the group finished: `cancel()` on the
  /// group (from any thread, or the Swift task awaiting ``JobController/run()``), a parent that
  /// cancels it, or one of its tasks that cancelled itself (see ``propagatesTaskCancellation``).
  /// A group that failed first (``JobController/fail(_:)``, a stop on failure) does not call it.
  ///
  /// The handler runs once every task of the group finished, right before the group itself
  /// finishes (so `completionBlock`, dependents, ``JobController/run()`` and
  /// `waitUntilFinished()` see it done), on the thread that finishes the group: the one that
  /// finished its last task, or the thread that cancelled it if nothing was running. JobKit holds
  /// no lock while it runs. The group then finishes with `isCancelled` `true` and no
  /// ``ConcurrentOperation/error``, and ``JobController/run()`` throws its
  /// ``ConcurrentOperation/cancellationReason`` (`CancellationError` after a plain cancel).
  ///
  /// Set it before the group can finish; safe from any thread. Setting it again replaces the
  /// handler. The group drops the handler when it finishes, called or not (a handler set after
  /// the finish is dropped at once), and releases it with no lock held, so what it captures may
  /// call back into the group from its `deinit`.
  public var onCancelled: (@Sendable () -> Void)? {
    get { withGroupState { $0.currentCancellationHandler } }
    set {
      let released = withGroupState { $0.setCancellationHandler(newValue) }
      _ = released  // released after the lock: the user's handler
    }
  }

  /// Whether a task that cancelled itself cancels the group. `true` for a ``SequentialGroup``
  /// and a ``ConcurrentGroup``; `false` for a command map's dispatch and for the groups a
  /// ``CommandQueue`` runs its commands in, whose commands are independent.
  ///
  /// A task *cancelled itself* when it finished with `isCancelled` `true` and no
  /// ``ConcurrentOperation/error`` while the group ran: whoever called its `cancel()` (the task
  /// itself, a test, another part of the program), it was not the group, since the group
  /// cancels its tasks only when it is cancelled or stops on failure itself. A nested group that
  /// ended cancelled is such a task for its parent, and so is a ``BlockTask`` or ``Work`` whose
  /// body threw `CancellationError` (it cancels itself, then finishes with no error) or a
  /// ``Pipeline`` a step of which did. Then, as if `cancel(reason:)` had been called on the
  /// group with the task's ``ConcurrentOperation/cancellationReason`` (`CancellationError` for a
  /// plain cancel), on the thread that finished the task: every other running task is cancelled
  /// with that reason, the
  /// tasks not started yet (later steps of a ``SequentialGroup``, or tasks a sequence has not
  /// made yet) never run, ``onCancelled`` is called, and the group finishes cancelled. A task
  /// that was cancelled and still finished with an error is a failure, as before. With `false`,
  /// a cancelled task is an ordinary finish and the group goes on.
  ///
  /// A plain ``JobController`` never does this: it routes a cancelled task like any other, and
  /// its callbacks decide (see <doc:RoutingAndThreads>). Set it before the group runs; safe from
  /// any thread.
  public var propagatesTaskCancellation: Bool {
    get { withGroupState { $0.propagatesTaskCancellation } }
    set { withGroupState { $0.setPropagatesTaskCancellation(newValue) } }
  }
}
