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
/// **A hook's state belongs to the job that installed it.** The table of hooks (64 stripes, each
/// a ``LockedBox``) is only looked up and written by a tracking thread (``observe(_:by:claimingQueue:)``)
/// and by ``removeRetired(_:)``; a hook's mutable fields (``Hook/fired``, its joined observers,
/// its queue claim) are guarded by its owner's job lock, which its firing takes anyway to book
/// the owner's finish: a finishing plain task takes no stripe lock. A fired hook stays in the
/// table, stale (a tracker of the same operation, or of a new one at the same address, replaces
/// it), until its owner job removes it with others in one pass: every
/// ``retiredBatch`` fired hooks (holding its finish until they are gone), and when it finishes:
/// a finished job leaves nothing here.
///
/// **Lock order: stripe, then job.** A tracker that finds a hook takes the hook's owner's job
/// lock inside the stripe's lock; nothing takes a stripe lock while it holds a job lock (stripe
/// locks are taken only by ``observe(_:by:claimingQueue:)`` and ``removeRetired(_:)``, both
/// called with no lock held). No `completionBlock` is read or written, no observer called and no
/// hook released (it holds the operation's own block) while either lock is held.
enum CompletionBlockHook {
  /// The observers of one plain operation.
  final class Hook: @unchecked Sendable {
    // @unchecked Sendable: the `let`s are set before publication; the `var`s are guarded by the
    // owner's job lock.
    /// The installing job's node. Held until the hook is released, so that a late firer (the
    /// wrapper run by Foundation after the tracking thread fired the hook) finds its lock.
    let owner: TrackedTask
    /// The operation's own block, read by the installer before the hook was published.
    let previous: (@Sendable () -> Void)?
    /// The operation's key in the table (the operation itself may be gone once the hook fired).
    let key: OperationKey
    // Exclusivity unchecked on every `var`: only touched under the owner's job lock, so the
    // runtime's check is redundant.
    /// The hook fired: the owner's finish was booked. A fired hook in the table is stale.
    @exclusivity(unchecked) private(set) var fired = false
    /// The nodes of jobs that joined (rare: empty for one job); handed out when the hook fires.
    @exclusivity(unchecked) private var others: [TrackedTask] = []
    /// A job claimed the right to add the operation to a queue.
    @exclusivity(unchecked) private var queueClaimed: Bool

    init(owner: TrackedTask, key: OperationKey, previous: (@Sendable () -> Void)?, claimingQueue: Bool) {
      self.owner = owner
      self.key = key
      self.previous = previous
      queueClaimed = claimingQueue
    }

    enum Join {
      /// The hook fired: it is stale, and the tracker installs a hook of its own.
      case stale
      /// The node's job already observes the operation.
      case duplicate
      /// The node joined; `claimed`: it may queue the operation.
      case joined(claimed: Bool)
    }

    /// Under the owner's job lock: `node` (of another job, or of the owner's) joins the hook.
    func join(_ node: TrackedTask, claimingQueue: Bool) -> Join {
      guard !fired else { return .stale }
      if owner.job === node.job || others.contains(where: { $0.job === node.job }) {
        return .duplicate
      }
      others.append(node)
      let claimed = !(claimingQueue && queueClaimed)
      queueClaimed = queueClaimed || claimingQueue
      return .joined(claimed: claimed)
    }

    /// Under the owner's job lock: marks the hook fired. Returns the joined nodes to signal
    /// after the lock, or `nil` if it had fired already (a second firer signals nobody).
    func fire() -> [TrackedTask]? {
      guard !fired else { return nil }
      fired = true
      return exchange(&others, with: [])
    }
  }

  /// How many fired hooks a job lets stand in the table before it removes them in one pass
  /// (one stripe lock per stripe they fall in, not one per task); it removes the rest when it
  /// finishes.
  static let retiredBatch = 256

  /// 64: ``stripeIndex(for:)`` takes 6 bits.
  private static let stripeCount = 64
  private static let stripes = (0..<stripeCount).map { _ in LockedBox([OperationKey: Hook]()) }

  /// The top bits of the key's multiplicative hash: a table's buckets come from its low bits,
  /// which stay the address's own, so those of one stripe do not all share them (the address's
  /// low bits chose the stripe until issue 19: a stripe's keys then started their probes in one
  /// bucket in 64, and its finds and deletions cost twice as much).
  private static func stripeIndex(for key: OperationKey) -> Int {
    Int(truncatingIfNeeded: ((key.address &>> 4) &* 0x9E37_79B9_7F4A_7C15) &>> 58)
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
    // Read the block with no lock held (`completionBlock` may be overridden); a joiner drops
    // the hook made here, after the lock.
    let hook = Hook(owner: node, key: key, previous: operation.completionBlock, claimingQueue: claimingQueue)
    let (joined, replaced): (Observation?, Hook?) = stripes[stripeIndex(for: key)].withLock { table in
      guard let index = table.index(forKey: key) else {
        table[key] = hook
        return (nil, nil)
      }
      let existing = table.values[index]
      // Lock order: stripe, then job.
      switch existing.owner.job.jobState.withLock({ _ in existing.join(node, claimingQueue: claimingQueue) }) {
      case .stale:
        // Released after the lock (its owner's list of retired hooks holds it anyway).
        table.values[index] = hook
        return (nil, existing)
      case .duplicate:
        return (.duplicate, nil)
      case .joined(let claimed):
        return (.joined(claimed: claimed), nil)
      }
    }
    _ = replaced
    if let joined { return joined }
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
  /// not take stays on the operation: it holds the hook, and so its owner's node and job, for
  /// as long as the operation lives, and runs the own block if called.)
  static func signalIfFinishedWhileWrapping(_ operation: Operation, _ hook: Hook) {
    guard operation.isFinished else { return }
    fire(hook, of: operation, runningPrevious: false)
  }

  private static func fire(_ hook: Hook, of operation: Operation, runningPrevious: Bool) {
    if runningPrevious {
      // The operation's own block goes back, even none: a wrapper left on the operation would
      // hold the hook, and with it the owner's node and job, as long as the operation lives.
      operation.completionBlock = hook.previous
      hook.previous?()
    }
    // The owner's job lock marks the hook fired (once) and books the owner's finish; the
    // joined nodes' jobs are told after it.
    hook.owner.job.hookDidFire(hook)
  }

  /// Removes the given fired hooks from the table, those still there (a tracker may have
  /// replaced one), taking each stripe's lock once. Called with no lock held; the hooks are
  /// released by the caller, after the locks.
  static func removeRetired(_ hooks: [Hook]) {
    guard !hooks.isEmpty else { return }
    // A counting sort of the hooks by stripe: `start[s]..<start[s + 1]` of `order` are the
    // indices in `hooks` of those in stripe `s`.
    var start = [Int](repeating: 0, count: stripeCount + 1)
    for hook in hooks {
      start[stripeIndex(for: hook.key) + 1] += 1
    }
    for stripe in 0..<stripeCount {
      start[stripe + 1] += start[stripe]
    }
    var order = [Int](repeating: 0, count: hooks.count)
    var next = start
    for (position, hook) in hooks.enumerated() {
      let stripe = stripeIndex(for: hook.key)
      order[next[stripe]] = position
      next[stripe] += 1
    }
    for stripe in 0..<stripeCount where start[stripe] < start[stripe + 1] {
      stripes[stripe].withLock { table in
        for position in order[start[stripe]..<start[stripe + 1]] {
          let hook = hooks[position]
          if let index = table.index(forKey: hook.key), table.values[index] === hook {
            // Not its last reference: `hooks` holds it.
            table.remove(at: index)
          }
        }
      }
    }
  }

  /// How many hooks the table holds whose owner is a node of `job`, fired or not (for tests).
  static func count(ownedBy job: JobController) -> Int {
    stripes.reduce(0) { sum, stripe in
      sum + stripe.withLock { table in table.values.count { $0.owner.job === job } }
    }
  }
}

/// The completion-block hooks a job installed that fired and still stand in the hook table,
/// stale: the job removes them in batches, and the rest when it finishes, so that no entry
/// outlives its job. A value of `JobState`, guarded by the job's lock.
///
/// The list holds the hooks, which hold their owner nodes, which hold the job: the cycle lasts
/// until the batch is taken, at the latest when the job finishes.
struct RetiredHooks {
  private var hooks: [CompletionBlockHook.Hook] = []

  /// Adds a fired hook. Returns the batch to remove from the table, after the lock, once
  /// ``CompletionBlockHook/retiredBatch`` hooks stand.
  mutating func retire(_ hook: CompletionBlockHook.Hook) -> [CompletionBlockHook.Hook]? {
    if hooks.isEmpty {
      hooks.reserveCapacity(CompletionBlockHook.retiredBatch)
    }
    hooks.append(hook)
    guard hooks.count >= CompletionBlockHook.retiredBatch else { return nil }
    return takeAll()
  }

  /// Every retired hook, for the job's finish.
  mutating func takeAll() -> [CompletionBlockHook.Hook] {
    exchange(&hooks, with: [])
  }
}

extension JobState {
  /// What a fired hook leaves to do after the lock.
  struct HookFiring {
    /// The nodes of jobs that joined the hook: each job is told of the finish.
    let others: [TrackedTask]
    /// A full batch of retired hooks to remove from the table (``CompletionBlockHook/removeRetired(_:)``),
    /// with a hold on the job: the caller releases it once they are removed, so that the job
    /// does not finish before (a finished job leaves no hook in the table).
    let retired: [CompletionBlockHook.Hook]?
  }

  /// A hook this job installed fired: mark it fired (once) and retire it. Returns `nil` if it
  /// had fired already: the caller then books nothing.
  mutating func fireHook(_ hook: CompletionBlockHook.Hook) -> HookFiring? {
    guard let others = hook.fire() else { return nil }
    let retired = retiredHooks.retire(hook)
    if retired != nil {
      // Cannot fail: the hook's node is not routed yet, so the job has not finished.
      _ = holdOpen()
    }
    return HookFiring(others: others, retired: retired)
  }
}
