import Foundation

/// The tasks a job tracks: every unrouted one (an intrusive list of their nodes, so tracking and
/// routing a task never hashes it) and the per-type groups with their counts and handlers. (The
/// finished ones waiting to be routed wait in the job's ``Outbox`` too.)
///
/// Whether a task is tracked twice is not decided here but where the task's finish is observed
/// (its ``ConcurrentOperation`` state, or the `completionBlock` hook), which sees every job
/// tracking it. Only touched under the job's lock.
struct TaskRegistry {
  /// How many tracked tasks have not been routed yet.
  private(set) var count = 0
  private var head: TaskNode?
  /// Per dynamic task type: unfinished count, handler and limit.
  private(set) var groups: [ObjectIdentifier: TaskTypeEntry] = [:]
  /// The group of the most recently tracked task: most jobs track runs of one type.
  private var lastGroup: TaskTypeEntry?
  /// Groups that reached zero while `main()` ran; their callbacks are due once it returned.
  private var groupsDueAfterMain: [TaskTypeEntry] = []

  var isEmpty: Bool { count == 0 }

  /// The group of tasks of dynamic type `type`, made on first use.
  mutating func group(for type: Operation.Type) -> TaskTypeEntry {
    if let lastGroup, lastGroup.type == type { return lastGroup }
    let key = ObjectIdentifier(type)
    let entry: TaskTypeEntry
    if let existing = groups[key] {
      entry = existing
    } else {
      entry = TaskTypeEntry(type: type)
      groups[key] = entry
    }
    lastGroup = entry
    return entry
  }

  /// Adds an unfinished task's node.
  mutating func insert(_ node: TaskNode) {
    node.link(before: head)
    head = node
    count += 1
    node.typeEntry.tracked()
  }

  /// Removes a node (routed, or a replaced retry attempt). Returns `true` if `node` was its
  /// group's last unfinished task.
  @discardableResult
  mutating func remove(_ node: TaskNode) -> Bool {
    guard node.state.isRegistered else { return false }
    node.markRemoved()
    node.unlink(from: &head)
    count -= 1
    return node.typeEntry.untracked()
  }

  /// Every unfinished node, newest first. Do not insert or remove while iterating.
  var nodes: Nodes { Nodes(current: head) }

  struct Nodes: Sequence, IteratorProtocol {
    fileprivate var current: TaskNode?

    mutating func next() -> TaskNode? {
      defer { current = current?.next }
      return current
    }
  }

  /// `group` reached zero while `main()` ran: its callback is due once `main()` returned.
  mutating func deferGroupCallback(_ group: TaskTypeEntry) {
    if !groupsDueAfterMain.contains(where: { $0 === group }) {
      groupsDueAfterMain.append(group)
    }
  }

  /// Whether a group callback may be due after `main()` (see ``nextDeferredGroup()``).
  var hasDeferredGroups: Bool { !groupsDueAfterMain.isEmpty }

  /// The next deferred group that is still at zero, if any.
  mutating func nextDeferredGroup() -> TaskTypeEntry? {
    while !groupsDueAfterMain.isEmpty {
      let group = groupsDueAfterMain.removeFirst()
      if group.unfinished == 0 { return group }
    }
    return nil
  }

  /// The job finished: drop the groups (and their handlers, which may capture the job). Returns
  /// them, for the caller to release after the lock.
  mutating func dropGroups() -> [TaskTypeEntry] {
    let dropped = Array(groups.values)
    groups = [:]
    lastGroup = nil
    groupsDueAfterMain = []
    return dropped
  }

  /// Unlinks every node one by one (a long chain of strong `next` links would otherwise be freed
  /// recursively when an abandoned job is freed).
  mutating func removeAll() {
    while let node = head {
      remove(node)
    }
  }
}
