import Foundation

/// The completion-block hooks a job installed (see ``CompletionBlockHook``) that fired and still
/// stand in the hook table, stale: the job removes them in batches, and the rest when it
/// finishes, so that no entry outlives its job. Guarded by the job's lock.
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
