import Foundation

/// The job running one ``CommandMap/dispatch(_:)``, with a report of which mappings it ran and
/// why the others did not run.
///
/// A dispatch chooses its commands when ``CommandMap/dispatch(_:)`` is called (see there), puts
/// them in one group, a ``SequentialGroup`` (on a map created with `concurrent: true`, a
/// ``ConcurrentGroup``) whose task queue is the map's ``CommandMap/queue``, starts that group on
/// the dispatching thread (which queues the first command) and starts this job on
/// ``JobController/sharedJobQueue``; the job tracks the group and finishes right after it. The
/// commands of a sequential dispatch run one after another in priority order, each starting
/// after the one before it finished.
///
/// A command that fails (a ``ConcurrentOperation`` that finished with an
/// ``ConcurrentOperation/error``) does not stop the others. The job then finishes with the
/// group's error, a ``JobFailures`` listing every failed command with its error, and
/// ``JobController/run()`` throws it. A dispatch that chose no command finishes at
/// once, without an error. Cancelling the job cancels its commands.
///
/// The report (``event``, ``ran``, ``commands``, ``skipped``) is fixed when the dispatch is
/// created and can be read from any thread at any time.
public final class CommandDispatch: JobController, @unchecked Sendable {
  // @unchecked Sendable: the properties added here are immutable; the rest is JobController's.

  /// Why a mapping of the dispatched event's type did not run in this dispatch.
  public struct Skip: Hashable, Sendable, CustomStringConvertible {
    /// The reason a mapping was skipped.
    public enum Reason: Hashable, Sendable {
      /// The guard at this index (in the order given to `map`) refused the event. The guards
      /// after it were not asked, and the mapping's command was not created.
      case guardRefused(index: Int)
      /// The mapping runs once and another dispatch, racing with this one, ran it first.
      case alreadyUsed
    }

    /// The mapping that did not run.
    public let mapping: CommandMapping
    /// Why it did not run.
    public let reason: Reason

    /// Creates a skip entry; dispatches create these, tests may compare against them.
    public init(_ mapping: CommandMapping, _ reason: Reason) {
      self.mapping = mapping
      self.reason = reason
    }

    /// For example `CommandMapping(Login, priority: 0, 1 guard): guard 0 refused`.
    public var description: String {
      switch reason {
      case .guardRefused(let index): return "\(mapping): guard \(index) refused"
      case .alreadyUsed: return "\(mapping): already used by another dispatch"
      }
    }
  }

  /// The dispatched event.
  public let event: any Sendable
  /// The mappings whose commands this dispatch runs, in the order it runs them.
  public let ran: [CommandMapping]
  /// The commands this dispatch runs, in the same order as ``ran`` (for a block mapping, the
  /// operation running the block).
  public let commands: [Operation]
  /// The mappings of the event's type, as they were when the dispatch began, that do not run in
  /// this dispatch, in priority order, each with its reason.
  public let skipped: [Skip]

  /// The group running ``commands``; `nil` when there is none.
  private let group: JobController?

  init(
    event: any Sendable,
    ran: [CommandMapping],
    commands: [Operation],
    skipped: [Skip],
    concurrent: Bool,
    queue: OperationQueue
  ) {
    self.event = event
    self.ran = ran
    self.commands = commands
    self.skipped = skipped
    if commands.isEmpty {
      group = nil
    } else {
      group =
        concurrent
        ? ConcurrentGroup(commands, taskQueue: queue) : SequentialGroup(commands, taskQueue: queue)
    }
    super.init(taskQueue: queue)
  }

  /// Tracks the group, starts it on this thread, then submits the job. Starting the group here,
  /// rather than from `main()` or through a queue, queues its first command before `dispatch`
  /// returns, so a serial map queue starts the dispatches' first commands in dispatch order.
  func launch() {
    if let group {
      track(group) { [unowned self] group in
        if let error = group.error { fail(error) }
      }
      group.start()
    }
    startJob()
  }
}
