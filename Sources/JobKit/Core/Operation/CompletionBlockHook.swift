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
/// Once an operation may be finishing, its `completionBlock` is written only by the wrapper
/// Foundation runs: corelibs reads the block of a finishing operation with no lock, so a write
/// racing that read could tear it or free the block it retains (the core model's long mode
/// crashed in `swift_retain` under `Operation.observeValue` so, issue 19).
///
/// The registry's locks guard nothing but the registry: no `completionBlock` is read or written,
/// and no observer is called, while one is held.
enum CompletionBlockHook {
  /// The observers of one plain operation. Its fields are only touched under its stripe's lock.
  final class Hook: @unchecked Sendable {
    // @unchecked Sendable: mutable fields are guarded by the registry stripe's lock.
    // Exclusivity unchecked on every field: only touched under that lock, so the runtime's
    // check (one per plain task on `fire`) is redundant.
    /// The installing job's node, and those of jobs that joined (rare: no array for one job).
    /// Both are dropped when the hook fires, so a wrapper left on a finished operation holds no
    /// job.
    @exclusivity(unchecked) var first: TrackedTask?
    @exclusivity(unchecked) var others: [TrackedTask] = []
    /// The operation's own block, known once the installer read it.
    @exclusivity(unchecked) var previous: (@Sendable () -> Void)?
    @exclusivity(unchecked) var fired = false
    /// A job claimed the right to add the operation to a queue.
    @exclusivity(unchecked) var queueClaimed = false

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
    /// The operation had finished when `node` came to wrap its block: `node` is registered but
    /// nothing was written (Foundation runs the operation's own block); the caller signals the
    /// observers with ``signalIfFinishedWhileWrapping(_:_:)``.
    case finished(Hook)
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
        if existing.first?.job === node.job || existing.others.contains(where: { $0.job === node.job }) {
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
    let wrapper: @Sendable () -> Void = { [hook, unowned(unsafe) operation] in
      // Foundation holds the operation while its completionBlock runs.
      fire(hook, of: operation, runningPrevious: true)
    }
    // Corelibs Foundation reads a finishing operation's block with no lock, after `isFinished`
    // turned true and after a section under the operation's lock (which the setter takes): a
    // write that overlaps that read can tear it or free the block it is retaining. So a task
    // that finished keeps its own block (Foundation runs it), and this check, the only one on
    // the way from `track`, comes right before the write, the wrapper made before it: only a
    // task that turns finished after the check and gets through Foundation's locked section
    // before the setter takes the lock (a thread preempted in between) can still meet the
    // write. Tracking before queueing avoids even that.
    if operation.isFinished {
      return .finished(hook)
    }
    operation.completionBlock = wrapper
    return .installed(hook, claimed: true)
  }

  /// For the installer: if `operation` finished while its block was being wrapped (or before,
  /// see ``Observation/finished(_:)``), Foundation
  /// took either block, its own or the wrapper (which runs the own block once), and may be
  /// reading it right now with no lock: so the block is left as it is, and the observers are
  /// signalled now; a later run of the wrapper signals nobody twice. (A wrapper Foundation did
  /// not take stays on the operation: it holds no job, and runs the own block if called.)
  static func signalIfFinishedWhileWrapping(_ operation: Operation, _ hook: Hook) {
    guard operation.isFinished else { return }
    fire(hook, of: operation, runningPrevious: false)
  }

  private static func fire(_ hook: Hook, of operation: Operation, runningPrevious: Bool) {
    let key = OperationKey(operation)
    let (first, others, previous): (TrackedTask?, [TrackedTask], (@Sendable () -> Void)?) = stripe(for: key).withLock {
      table in
      let previous = hook.previous
      guard !hook.fired else { return (nil, [], previous) }
      hook.fired = true
      if table[key] === hook {
        table.removeValue(forKey: key)
      }
      defer {
        hook.first = nil
        hook.others = []
      }
      return (hook.first, hook.others, previous)
    }
    if runningPrevious, let previous {
      // The operation's own block goes back (a wrapper left in place when there was none is
      // inert: it signals nobody twice and holds no job), and runs once.
      operation.completionBlock = previous
      previous()
    }
    if let first {
      first.job.taskDidFinish(first)
    }
    for node in others {
      node.job.taskDidFinish(node)
    }
  }
}
