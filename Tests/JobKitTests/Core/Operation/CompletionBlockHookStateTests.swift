import Foundation
import Testing

@testable import JobKit

/// The completion-block hook's two pieces of state, fed one event at a time on one thread: a
/// hook's atomic `Phase` (which decides, with no lock, whether a finish must take the stripe
/// lock to read the observers) and a registry `Stripe` (which keeps fired hooks until an
/// operation at the same address replaces them or a sweep drops them).
@Suite("Completion block hook state")
struct CompletionBlockHookStateTests {
  private typealias Hook = CompletionBlockHook.Hook

  private func makeHook(job: JobController = JobController(), ownBlock: (@Sendable () -> Void)? = nil) -> Hook {
    let task = BlockOperation {}
    let node = TaskNode(job: job, task: task, group: TaskTypeEntry(type: type(of: task)))
    // The node holds the task, which the hook holds unowned.
    return Hook.make(node, of: task, ownBlock: ownBlock, queueClaimed: false)
  }

  /// The operation's own block is the wrapper's to take, once: after that the hook holds
  /// nothing of the user's (a block's captures are released with it).
  @Test func theWrapperTakesTheOwnBlockOnce() {
    final class Capture: Sendable {}
    weak var released: Capture?
    let hook: Hook
    do {
      let capture = Capture()
      released = capture
      hook = makeHook(ownBlock: { _ = capture })
    }
    #expect(released != nil)
    do {
      let ownBlock = hook.takeOwnBlock()
      #expect(ownBlock != nil)
    }
    #expect(hook.takeOwnBlock() == nil)
    // The hook is still alive and holds the block no more.
    #expect(released == nil)
    withExtendedLifetime(hook) {}
  }

  /// `open` → `joined` → `fired`; each step returns the phase it found, and nothing leaves
  /// `fired` (a joiner that comes after the finish sees it and registers a new hook instead).
  @Test func aHooksPhaseOnlyMovesForward() {
    let hook = makeHook()
    #expect(hook.phase == .open)
    #expect(hook.join() == .open)
    #expect(hook.phase == .joined)
    #expect(hook.join() == .joined)
    #expect(hook.fire() == .joined)
    #expect(hook.phase == .fired)
    #expect(hook.fire() == .fired)
    #expect(hook.join() == .fired)
    #expect(hook.phase == .fired)
  }

  /// A finish that found the hook `open` (no job joined) takes its observer with no lock, once:
  /// a stale hook holds no node, so no job.
  @Test func theFinishThatFiresTakesTheObserversOnce() {
    let job = JobController()
    let hook = makeHook(job: job)
    #expect(hook.fire() == .open)
    let (first, others) = hook.takeObservers()
    #expect(first?.job === job)
    #expect(others.isEmpty)
    let (again, _) = hook.takeObservers()
    #expect(again == nil)
  }

  /// An operation at the address of a finished one (its hook fired, still registered) replaces
  /// the stale hook, which goes back to the caller to be released after the lock.
  @Test func aStaleHookIsReplacedByTheNextRegistrationAtItsAddress() {
    var stripe = CompletionBlockHook.Stripe()
    let operation = BlockOperation {}
    let key = OperationKey(operation)
    let stale = makeHook()
    #expect(stripe.register(stale, for: key).replaced == nil)
    _ = stale.fire()
    let fresh = makeHook()
    let (replaced, swept) = stripe.register(fresh, for: key)
    #expect(replaced === stale)
    #expect(swept.isEmpty)
    #expect(stripe.hooks.count == 1)
    #expect(stripe.hooks[key] === fresh)
  }

  /// A stripe sweeps its fired hooks when it has grown to its threshold, which is then twice
  /// the hooks it kept (at least `minimumSweep`): it never holds much more than twice its live
  /// hooks, and live hooks are never dropped. The swept table goes back to the caller, to be
  /// released after the lock.
  @Test func aStripeSweepsFiredHooksWhenItHasDoubled() {
    var stripe = CompletionBlockHook.Stripe()
    let minimum = CompletionBlockHook.Stripe.minimumSweep
    let operations = (0..<(3 * minimum + 2)).map { _ in BlockOperation {} }
    var hooks: [Hook] = []
    for operation in operations.prefix(minimum) {
      let hook = makeHook()
      hooks.append(hook)
      #expect(stripe.register(hook, for: OperationKey(operation)).swept.isEmpty)
    }
    // Half of them fired: the next new key sweeps them.
    for hook in hooks.prefix(minimum / 2) {
      _ = hook.fire()
    }
    let swept = stripe.register(makeHook(), for: OperationKey(operations[minimum])).swept
    #expect(swept.count == minimum)
    #expect(stripe.hooks.count == minimum / 2 + 1)
    #expect(stripe.hooks.values.allSatisfy { $0.phase != .fired })
    #expect(stripe.sweepAt == minimum)
    // All live: a sweep keeps every hook and raises the threshold to twice what it kept.
    for operation in operations[(minimum + 1)...].prefix(minimum / 2 - 1) {
      #expect(stripe.register(makeHook(), for: OperationKey(operation)).swept.isEmpty)
    }
    #expect(stripe.hooks.count == minimum)
    let kept = stripe.register(makeHook(), for: OperationKey(operations[2 * minimum]))
    #expect(kept.swept.count == minimum)
    #expect(stripe.hooks.count == minimum + 1)
    #expect(stripe.sweepAt == 2 * minimum)
  }

  /// Registering again at a live key (not a path the hook takes: a live hook is joined) does
  /// not sweep: only a new key grows the stripe.
  @Test func onlyANewKeyCanSweep() {
    var stripe = CompletionBlockHook.Stripe()
    let minimum = CompletionBlockHook.Stripe.minimumSweep
    let operations = (0..<minimum).map { _ in BlockOperation {} }
    for operation in operations {
      let hook = makeHook()
      _ = stripe.register(hook, for: OperationKey(operation))
      _ = hook.fire()
    }
    let (replaced, swept) = stripe.register(makeHook(), for: OperationKey(operations[0]))
    #expect(replaced != nil)
    #expect(swept.isEmpty)
    #expect(stripe.hooks.count == minimum)
  }
}

extension CompletionBlockHook.Stripe {
  /// Registers `hook` as `observe` does once it decided not to join: at the position of the
  /// hook registered for `key`, if any.
  fileprivate mutating func register(
    _ hook: CompletionBlockHook.Hook, for key: OperationKey
  ) -> (replaced: CompletionBlockHook.Hook?, swept: [OperationKey: CompletionBlockHook.Hook]) {
    register(hook, for: key, replacing: hooks.index(forKey: key))
  }
}
