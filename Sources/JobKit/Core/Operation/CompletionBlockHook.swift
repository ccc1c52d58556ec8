internal import CJobKitAtomics
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
/// racing that read could tear it or free the block it retains (`CompletionBlockHookRaceTests`).
///
/// Locks: registering takes one stripe lock (the registry is striped by operation address);
/// the finish takes none unless another job joined (rare): the hook's ``Phase`` is one atomic
/// word, and a fired hook stays in the registry until a later registration replaces it (the
/// same address) or sweeps it (see ``Stripe``). The registry's locks guard nothing but the
/// registry: no `completionBlock` is read or written, no observer is called and no hook is
/// released while one is held.
enum CompletionBlockHook {
  /// Where a hook is in its life. Only ever moves forward: `open` → `joined` → `fired`, or
  /// `open` → `fired`.
  enum Phase: Int {
    /// Only the installing job observes the operation.
    case open
    /// Another job joined, under the stripe lock: the finish takes that lock to read the
    /// observers.
    case joined
    /// The observers were (or are being) told; the hook is stale.
    case fired
  }

  /// A hook's fields. Who touches them when, with no lock for the common case:
  /// - all are written before the hook is published (under the stripe lock);
  /// - `others` and `queueClaimed` (and a read of `first`) only by joiners, under the stripe
  ///   lock, after they moved the phase from `open` (or saw `joined`);
  /// - `first` and `others` are taken by the one finish that moved the phase to `fired`: with
  ///   no lock if it was `open` (no joiner ever touched them or will), under the stripe lock if
  ///   `joined`.
  struct Fields {
    /// The installing job's node, and those of jobs that joined (rare: no array for one job).
    /// Both are dropped when the hook fires, so a stale hook holds no job.
    var first: TaskNode?
    var others: [TaskNode] = []
    /// A job claimed the right to add the operation to a queue.
    var queueClaimed: Bool
  }

  /// A hook's header: its ``Fields`` and what only the wrapper touches once the hook is
  /// published, beside them (never inside an access to the fields, which may overlap).
  struct Header {
    var fields: Fields
    /// The operation's own `completionBlock`, read before the wrapper replaced it; the wrapper
    /// takes it (puts it back and runs it), so a stale hook holds nothing of the user's unless
    /// Foundation never ran the wrapper (the operation finished as it was being wrapped).
    var ownBlock: (@Sendable () -> Void)?
    /// The observed operation, for the wrapper (Foundation holds it while its block runs).
    unowned(unsafe) let operation: Operation
  }

  /// The observers of one plain operation: its ``Header`` and, as the buffer's one element, its
  /// ``Phase`` as an atomic word (a tail allocation: one object per hook, which is also the
  /// wrapper's context).
  /// ManagedBuffer is not Sendable: the wrapper, which Foundation runs on another thread, holds
  /// the hook through ``Shared``.
  final class Hook: ManagedBuffer<Header, Int> {
    /// A hook as the wrapper holds it.
    struct Shared: @unchecked Sendable {
      // @unchecked Sendable: the phase is atomic; the header is touched as `Fields` and `Header` say.
      let hook: Hook
    }

    static func make(
      _ observer: TaskNode, of operation: Operation, ownBlock: (@Sendable () -> Void)?, queueClaimed: Bool
    ) -> Hook {
      let buffer = create(minimumCapacity: 1) { _ in
        Header(fields: Fields(first: observer, queueClaimed: queueClaimed), ownBlock: ownBlock, operation: operation)
      }
      buffer.withUnsafeMutablePointerToElements { $0.initialize(to: Phase.open.rawValue) }
      // `create` makes an instance of the class it is called on.
      return buffer as! Hook
    }

    var phase: Phase {
      withUnsafeMutablePointerToElements { Phase(rawValue: cjobkit_atomic_load($0))! }
    }

    /// Sets the phase to `fired`; returns the phase it had.
    func fire() -> Phase {
      withUnsafeMutablePointerToElements { Phase(rawValue: cjobkit_atomic_exchange($0, Phase.fired.rawValue))! }
    }

    /// A joiner (under the stripe lock): moves `open` to `joined`; returns the phase seen.
    func join() -> Phase {
      withUnsafeMutablePointerToElements {
        Phase(rawValue: cjobkit_atomic_compare_exchange($0, Phase.open.rawValue, Phase.joined.rawValue))!
      }
    }

    func withFields<Result>(_ body: (inout Fields) -> Result) -> Result {
      withUnsafeMutablePointerToHeader { body(&$0.pointee.fields) }
    }

    /// Takes the operation's own block out (for the wrapper; Foundation runs it once).
    func takeOwnBlock() -> (@Sendable () -> Void)? {
      withUnsafeMutablePointerToHeader { header in
        defer { header.pointee.ownBlock = nil }
        return header.pointee.ownBlock
      }
    }

    /// The observed operation (unowned: valid while Foundation runs the wrapper).
    var operation: Operation {
      withUnsafeMutablePointerToHeader { $0.pointee.operation }
    }

    /// Takes the observers out (for the finish that fired the hook).
    func takeObservers() -> (first: TaskNode?, others: [TaskNode]) {
      withFields { fields in
        defer {
          fields.first = nil
          fields.others = []
        }
        return (fields.first, fields.others)
      }
    }
  }

  /// One stripe of the registry: the hooks of the operations whose addresses map to it.
  ///
  /// A fired hook is not removed by the finish (that would take the stripe lock on every
  /// finish): it is replaced when an operation at the same address registers, and swept when
  /// the stripe has grown to twice the hooks it kept at the last sweep (at least
  /// `minimumSweep`), so a stripe holds at most about twice its live hooks, at an amortized
  /// constant cost per registration. A stale hook holds no job and no observer.
  struct Stripe {
    static let minimumSweep = 64

    var hooks: [OperationKey: Hook] = [:]
    var sweepAt = minimumSweep

    /// Registers `hook` for `key`: in place of the fired hook at `stale` (its position, which
    /// the caller looked up to decide between joining and registering), or as a new key, which
    /// may sweep first. Returns what it replaced and what it swept, for the caller to release
    /// after the lock.
    mutating func register(
      _ hook: Hook, for key: OperationKey, replacing stale: [OperationKey: Hook].Index?
    ) -> (replaced: Hook?, swept: [OperationKey: Hook]) {
      if let stale {
        let replaced = hooks.values[stale]
        hooks.values[stale] = hook
        return (replaced, [:])
      }
      var swept: [OperationKey: Hook] = [:]
      if hooks.count >= sweepAt {
        swept = hooks
        hooks = swept.filter { $0.value.phase != .fired }
        sweepAt = Swift.max(Self.minimumSweep, hooks.count * 2)
      }
      hooks[key] = hook
      return (nil, swept)
    }
  }

  private static let stripeCount = 64
  private static let stripes = (0..<stripeCount).map { _ in LockedBox(Stripe()) }

  /// The stripe `key` maps to (internal for the tests that hold its lock).
  static func stripe(for key: OperationKey) -> LockedBox<Stripe> {
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
  static func observe(_ operation: Operation, by node: TaskNode, claimingQueue: Bool) -> Observation {
    let key = OperationKey(operation)
    let stripe = stripe(for: key)
    // Read the block with no lock held (`completionBlock` may be overridden); a joiner drops it.
    let ownBlock = operation.completionBlock
    let (hook, joined, replaced, swept): (Hook?, Observation?, Hook?, [OperationKey: Hook]) = stripe.withLock {
      stripe in
      // One lookup: its position serves both the join and the replacement of a stale hook.
      let index = stripe.hooks.index(forKey: key)
      if let index, case let existing = stripe.hooks.values[index], existing.join() != .fired {
        let joined = existing.withFields { fields -> Observation in
          if fields.first?.job === node.job || fields.others.contains(where: { $0.job === node.job }) {
            return .duplicate
          }
          fields.others.append(node)
          let claimed = !(claimingQueue && fields.queueClaimed)
          fields.queueClaimed = fields.queueClaimed || claimingQueue
          return .joined(claimed: claimed)
        }
        return (nil, joined, nil, [:])
      }
      // No hook, or a stale one (this operation's, finished, or a freed one's at its address).
      let hook = Hook.make(node, of: operation, ownBlock: ownBlock, queueClaimed: claimingQueue)
      let (replaced, swept) = stripe.register(hook, for: key, replacing: index)
      return (hook, nil, replaced, swept)
    }
    // Released here, after the lock.
    _ = (replaced, swept)
    guard let hook else { return joined ?? .duplicate }
    // The hook is the wrapper's one capture, so the closure needs no context of its own.
    let wrapper: @Sendable () -> Void = { [shared = Hook.Shared(hook: hook)] in
      // Foundation holds the operation while its completionBlock runs, and runs it once.
      let hook = shared.hook
      fire(hook, of: hook.operation, ownBlock: hook.takeOwnBlock())
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

  /// A job freed before it finished lets go of `operation` (alive: the caller holds it): `node`
  /// leaves its hook, and, if `releasingClaim`, the queueing its job claimed is given back. A hook
  /// left with no observer is marked `fired`: a later registration for the operation (or one at
  /// its address once it is freed) replaces it instead of joining observers of a freed job, and
  /// the wrapper, if Foundation runs it, only puts the operation's own block back and runs it.
  static func detach(_ node: TaskNode, from operation: Operation, releasingClaim: Bool) {
    let key = OperationKey(operation)
    stripe(for: key).withLock { stripe in
      // Joined first (under this lock, as any joiner): the finish then reads the observers
      // under this lock too, and none is taken while they change.
      guard let hook = stripe.hooks[key], hook.join() != .fired else { return }
      let empty = hook.withFields { fields -> Bool in
        if fields.first === node {
          fields.first = nil
        } else {
          fields.others.removeAll { $0 === node }
        }
        if releasingClaim {
          fields.queueClaimed = false
        }
        return fields.first == nil && fields.others.isEmpty
      }
      if empty {
        _ = hook.fire()
      }
    }
  }

  /// For the installer: if `operation` finished while its block was being wrapped (or before,
  /// see ``Observation/finished(_:)``), Foundation
  /// took either block, its own or the wrapper (which runs the own block once), and may be
  /// reading it right now with no lock: so the block is left as it is, and the observers are
  /// signalled now; a later run of the wrapper signals nobody twice. (A wrapper Foundation did
  /// not take stays on the operation: it holds no job, and runs the own block if called.)
  static func signalIfFinishedWhileWrapping(_ operation: Operation, _ hook: Hook) {
    guard operation.isFinished else { return }
    fire(hook, of: operation, ownBlock: nil)
  }

  /// Signals the observers unless the hook fired already; then puts `ownBlock`, the operation's
  /// own block (from the wrapper only), back and runs it.
  private static func fire(_ hook: Hook, of operation: Operation, ownBlock: (@Sendable () -> Void)?) {
    let first: TaskNode?
    let others: [TaskNode]
    switch hook.fire() {
    case .open:
      // No job joined, and none will (a joiner now finds the hook fired).
      (first, others) = hook.takeObservers()
    case .joined:
      // A joiner may still be appending under the stripe lock.
      (first, others) = stripe(for: OperationKey(operation)).withLock { _ in hook.takeObservers() }
    case .fired:
      (first, others) = (nil, [])
    }
    if let ownBlock {
      // The operation's own block goes back (a wrapper left in place when there was none is
      // inert: it signals nobody twice and holds no job), and runs once.
      operation.completionBlock = ownBlock
      ownBlock()
    }
    if let first {
      first.signalFinish()
    }
    for node in others {
      node.signalFinish()
    }
  }
}
