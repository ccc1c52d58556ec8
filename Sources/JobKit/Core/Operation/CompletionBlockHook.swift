import Foundation

/// Observes the finish of plain `Operation`s (not ``ConcurrentOperation``s) through their
/// `completionBlock`, the only finish hook Foundation offers for them on Linux.
///
/// One operation gets one wrapper however many jobs track it, even at the same moment: a job
/// that finds a wrapper already being installed joins it instead of wrapping the wrapper (two
/// jobs that each read the old block and each wrote their own would lose one of them, and that
/// job would wait forever). The wrapper puts the operation's own block back, runs it once, then
/// tells every joined observer once.
///
/// The registry is looked up when a job starts observing an operation, never when it finishes:
/// the wrapper holds its hook and tells the installing job first, with no registry lock (that
/// job's own state ignores a second report of one finish), then takes the registry's lock once
/// to retire the hook and tell the jobs that joined it.
///
/// The registry's locks guard nothing but the registry: no `completionBlock` is read or written,
/// and no observer is called, while one is held.
enum CompletionBlockHook {
  /// The observers of one plain operation. Its fields are only touched under its stripe's lock.
  final class Hook: @unchecked Sendable {
    // @unchecked Sendable: `first` and `previous` never change; the rest is guarded by the
    // registry stripe's lock.
    /// The installing job's node. The wrapper puts the operation's own block back when it runs,
    /// so a finished operation holds neither the wrapper nor this job.
    let first: TrackedTask
    /// The nodes of jobs that joined (rare), dropped when the hook fires.
    var others: [TrackedTask] = []
    /// The operation's own block, read by the installer before the hook was published.
    let previous: (@Sendable () -> Void)?
    var fired = false
    /// A job claimed the right to add the operation to a queue.
    var queueClaimed = false

    init(_ observer: TrackedTask, previous: (@Sendable () -> Void)?) {
      first = observer
      self.previous = previous
    }
  }

  private static let stripeCount = 64
  private static let stripes = (0..<stripeCount).map { _ in LockedBox([OperationKey: Hook]()) }

  private static func stripe(for key: OperationKey) -> LockedBox<[OperationKey: Hook]> {
    stripes[Int((key.address &>> 4) % UInt(stripeCount))]
  }

  enum Observation {
    /// `node` installs the wrapper: the caller must call ``signalIfFinishedWhileWrapping(_:_:)``
    /// unless it queued the operation itself. `claimed`: it may queue it.
    case installed(Hook, claimed: Bool)
    /// `node` joined another job's wrapper. `claimed`: it may queue the operation.
    case joined(claimed: Bool)
    /// `node`'s job already observes the operation: nothing registered.
    case duplicate
  }

  /// Arranges for `node` to be signalled once `operation` finished and, if `claimingQueue`,
  /// claims the right to add it to a queue (only one job gets it: adding an operation to two
  /// queues is a fatal error in Foundation).
  static func observe(_ operation: Operation, by node: TrackedTask, claimingQueue: Bool) -> Observation {
    let key = OperationKey(operation)
    let stripe = stripe(for: key)
    // Read the block with no lock held (`completionBlock` may be overridden); a joiner drops it.
    let previous = operation.completionBlock
    let (hook, joined): (Hook?, Observation?) = stripe.withLock { table in
      if let existing = table[key], !existing.fired {
        if existing.first.job === node.job || existing.others.contains(where: { $0.job === node.job }) {
          return (nil, .duplicate)
        }
        existing.others.append(node)
        let claimed = !(claimingQueue && existing.queueClaimed)
        existing.queueClaimed = existing.queueClaimed || claimingQueue
        return (nil, .joined(claimed: claimed))
      }
      let hook = Hook(node, previous: previous)
      hook.queueClaimed = claimingQueue
      table[key] = hook
      return (hook, nil)
    }
    guard let hook else { return joined ?? .duplicate }
    operation.completionBlock = { [hook, unowned(unsafe) operation] in
      // The operation is alive when its block starts (the installing job holds it until it is
      // routed, which this block starts). Held strongly until the hook is retired: once routed,
      // the job drops it, and a new operation at its address must not find this hook.
      withExtendedLifetime(operation) { operation in
        fire(hook, of: operation, runningPrevious: true)
      }
    }
    return .installed(hook, claimed: true)
  }

  /// For the installer: if `operation` finished while its block was being wrapped, Foundation
  /// may have taken either block. Puts the operation's own block back (if Foundation took the
  /// wrapper, the wrapper still runs the own block once) and signals the observers now; a later
  /// run of the wrapper signals nobody twice.
  static func signalIfFinishedWhileWrapping(_ operation: Operation, _ hook: Hook) {
    guard operation.isFinished else { return }
    // Already fired: the wrapper ran and did all of this.
    guard !stripe(for: OperationKey(operation)).withLock({ _ in hook.fired }) else { return }
    operation.completionBlock = hook.previous
    fire(hook, of: operation, runningPrevious: false)
  }

  private static func fire(_ hook: Hook, of operation: Operation, runningPrevious: Bool) {
    if runningPrevious {
      // The operation's own block goes back (none if it had none: the wrapper, and the job it
      // holds, are released once Foundation returns from it), and runs once.
      operation.completionBlock = hook.previous
      hook.previous?()
    }
    // The installer first, with no registry lock: its job ignores a second report of one
    // finish, so the wrapper and `signalIfFinishedWhileWrapping` may both get here.
    hook.first.job.taskDidFinish(hook.first)
    let key = OperationKey(operation)
    let others: [TrackedTask] = stripe(for: key).withLock { table in
      guard !hook.fired else { return [] }
      hook.fired = true
      if table[key] === hook {
        table.removeValue(forKey: key)
      }
      defer { hook.others = [] }
      return hook.others
    }
    for node in others {
      node.job.taskDidFinish(node)
    }
  }
}
