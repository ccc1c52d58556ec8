import Foundation

/// The tasks waiting in `pending` when the job is suspended are suspended too, and remembered in
/// `suspendedWaiting` until the resume, their start (`Launch.suspendedWhileWaiting`) or a stop
/// takes them.
extension GroupState {
  /// The job is being suspended: returns the waiting `ConcurrentOperation`s, which the caller
  /// suspends, remembered so that the resume (or their start, see `Launch`) resumes them.
  mutating func suspendWaiting() -> [ConcurrentOperation] {
    var children: [ConcurrentOperation] = []
    for case let child as ConcurrentOperation in pending.all {
      suspendedWaiting[OperationKey(child)] = child
      children.append(child)
    }
    return children
  }

  /// `task`, just added while the job is suspended, is suspended with the waiting tasks if it
  /// still waits. Returns whether it does (the caller then suspends it).
  mutating func suspendWaiting(_ task: ConcurrentOperation) -> Bool {
    guard pending.contains(task) else { return false }
    suspendedWaiting[OperationKey(task)] = task
    return true
  }

  /// The job is being resumed: returns the waiting tasks the suspension suspended, which the
  /// caller resumes.
  mutating func resumeWaiting() -> [ConcurrentOperation] {
    guard !suspendedWaiting.isEmpty else { return [] }
    return Array(exchange(&suspendedWaiting, with: [:]).values)
  }

  /// The tasks of `tasks` (leaving `pending`) that the suspension suspended, no longer waiting.
  mutating func takeSuspendedWaiting(_ tasks: Tasks) -> [ConcurrentOperation] {
    var taken: [ConcurrentOperation] = []
    for task in tasks {
      if let suspended = suspendedWaiting.removeValue(forKey: OperationKey(task)) {
        taken.append(suspended)
      }
    }
    return taken
  }
}
