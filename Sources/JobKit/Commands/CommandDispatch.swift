import Foundation

/// The job running one ``CommandMap/dispatch(_:)``, with a report of which mappings it ran and
/// why the others did not run.
///
/// A dispatch chooses its commands when ``CommandMap/dispatch(_:)`` is called (see there) and runs
/// them itself, as one job: it is a ``GroupJob`` that runs its commands one after another in
/// priority order, like a ``SequentialGroup`` (on a map created with `concurrent: true`, all
/// together, like a ``ConcurrentGroup``), on the map's ``CommandMap/queue``. `dispatch` starts it on
/// the dispatching thread, which queues the first command (every command, on a concurrent map)
/// before `dispatch` returns; each later command of a sequential dispatch starts after the one
/// before it finished. The job takes no slot of any queue.
///
/// A command that fails (a ``ConcurrentOperation`` that finished with an
/// ``ConcurrentOperation/error``) does not stop the others. The job then finishes with a
/// ``JobFailures`` error listing every failed command with its error (also
/// ``JobController/failures``), and ``JobController/run()`` throws it. A dispatch that chose no
/// command finishes at once, without an error. Cancelling the job cancels its commands.
///
/// The report (``event``, ``ran``, ``commands``, ``skipped``) is fixed when the dispatch is
/// created and can be read from any thread at any time.
public final class CommandDispatch: GroupJob, @unchecked Sendable {
  // @unchecked Sendable: the properties added here are immutable; the rest is GroupJob's.

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
    super.init(mode: concurrent ? .concurrent : .sequential, tasks: commands, taskQueue: queue)
  }

  /// Starts the job on this thread: its `main()` queues the first command (all of them when
  /// concurrent) before `dispatch` returns, so a serial map queue starts the dispatches' first
  /// commands in dispatch order. The job is in no queue; it finishes when its last command was
  /// routed.
  func launch() {
    start()
  }
}
