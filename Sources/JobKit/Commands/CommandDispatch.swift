import Foundation

/// The job running one ``CommandMap/dispatch(_:)``, with a report of which mappings it ran and
/// why the others did not run.
///
/// It runs the commands in priority order, one after another (all together on a concurrent map),
/// on the map's ``CommandMap/queue``. A failed command does not stop the others: the job then
/// finishes with ``JobFailures``. The report (``ran``, ``commands``, ``skipped``) can be read from
/// any thread at any time. The rules in full: <doc:CommandMapRules>.
public final class CommandDispatch: GroupJob, @unchecked Sendable {
  // @unchecked Sendable: the properties added here are immutable (the report is behind the
  // chooser's lock); the rest is GroupJob's.

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
  public var event: any Sendable { chooser.event }
  /// The mappings whose commands this dispatch ran (or runs), in the order it ran them.
  public var ran: [CommandMapping] { chooser.report.withLock { $0.chosen.map(\.mapping) } }
  /// The commands this dispatch created, in the same order as ``ran`` (for a block mapping, the
  /// operation running the block).
  public var commands: [Operation] { chooser.report.withLock { $0.chosen.map(\.command) } }
  /// The mappings of the event's type, as they were when the dispatch began, that were
  /// considered and did not run, in priority order, each with its reason.
  public var skipped: [Skip] { chooser.report.withLock { $0.skipped } }

  private let chooser: CommandChooser
  private let isConcurrent: Bool

  /// Makes the job and adds its first command (every command, when `concurrent`), chosen on
  /// this thread.
  init(chooser: CommandChooser, concurrent: Bool, queue: OperationQueue, sharing privateQueue: OwnQueueFlag?) {
    self.chooser = chooser
    self.isConcurrent = concurrent
    super.init(sequential: !concurrent, tasks: [], taskQueue: queue)
    if let privateQueue {
      shareOwnQueueFlag(privateQueue)
    }
    while let command = chooser.next() {
      add(command)
      if !concurrent { break }
    }
  }

  /// Starts the job on this thread: its `main()` queues the first command (all of them when
  /// concurrent) before `dispatch` returns, so a serial map queue starts the dispatches' first
  /// commands in dispatch order. The job is in no queue; it finishes when its last command was
  /// routed.
  func launch() {
    start()
  }

  /// A command finished (in the job's callback, so the job cannot finish meanwhile): on a
  /// sequential map, the next mapping whose guards approve gets its turn.
  override func groupTaskFinished(_ task: Operation) {
    super.groupTaskFinished(task)
    guard !isConcurrent, !isCancelled, isRunningTasks,
      let next = chooser.next()
    else { return }
    add(next)
  }

  /// The job finished, however it ended: the mappings not considered are dropped.
  override func operationDidFinish(_ operation: ConcurrentOperation) {
    super.operationDidFinish(operation)
    chooser.stop()
  }
}
