import Foundation

/// Which tracked tasks wait for which dependencies (`trackAndQueue(_:after:completion:)`): a
/// task waiting for its dependencies is not queued until every one of them was routed by its
/// job; a routed task releases the tasks that waited for it last.
///
/// A value owned by `JobState` (its `dependencies`), changed only under the job's lock. Inactive
/// until a job first tracks a task with dependencies, so a job that never does pays one `Bool`
/// read per routed task. Once active it indexes the job's unrouted tasks by operation, to tell
/// "tracked, not routed yet" from "not tracked yet" (or finished before it was named).
///
/// A dependency routed between the caller's read of its `isFinished` and
/// ``wait(_:for:payload:window:)`` is caught by a *window* (``openWindow()``) opened before that
/// read: while one is open, the tasks routed since are remembered weakly, with the routing's
/// sequence number, and dropped once no open window can need them.
///
/// Generic over the job's node and what a waiting task carries (`Payload`), so it is tested with
/// plain values. Transitions return, or collect in ``takeReleased()``, the tasks released; the
/// caller decides after the lock whether each runs or is skipped. Nothing a waiting task carries
/// is released under the lock.
struct TaskDependencies<Node: AnyObject, Payload> {
  /// A task that waits no more, and why.
  struct Release {
    enum Reason: Equatable {
      /// Its dependencies were all routed.
      case ready
      /// Nothing could route these dependencies any more (operation identifiers, in the order
      /// they were named): never tracked, or waiting in a cycle.
      case stalled([ObjectIdentifier])
      /// It was routed or dropped itself while waiting: nothing to do but release the payload
      /// after the lock.
      case dropped
    }

    let node: Node
    let payload: Payload
    let reason: Reason
  }

  /// A dependency as named by a waiting task: its identity, the object (to tell it from a freed
  /// one at the same address), and whether it had finished before the task was tracked with it.
  struct Named {
    let key: ObjectIdentifier
    let object: AnyObject
    let finishedBefore: Bool
  }

  private struct Waiter {
    let node: Node
    let payload: Payload
    /// Dependencies not routed yet, in the order they were named.
    var pending: [ObjectIdentifier]
  }

  private struct RoutedRecord {
    weak var object: AnyObject?
    /// The routing's sequence number (see `routings`).
    let sequence: UInt64
  }

  /// Whether the job has used dependencies; until then nothing below is kept.
  private(set) var isActive = false
  /// The job's tracked tasks not routed yet, by operation.
  private var unrouted: [ObjectIdentifier: Node] = [:]
  /// The tasks routed while a window was open, by operation.
  private var routed: [ObjectIdentifier: RoutedRecord] = [:]
  /// How many tasks were routed since the job became active.
  private var routings: UInt64 = 0
  /// Open windows, by the value of `routings` when each opened (several may share one).
  private var openWindows: [UInt64: Int] = [:]
  /// When `routed` is next pruned of records no open window needs.
  private var pruneAt = 64
  /// Waiting tasks, by node.
  private var waiters: [ObjectIdentifier: Waiter] = [:]
  /// The waiting tasks of each dependency not routed yet, by operation; by node.
  private var dependants: [ObjectIdentifier: [ObjectIdentifier]] = [:]
  /// Released tasks, for the caller to take.
  private var released: [Release] = []

  /// How many tasks wait for dependencies.
  var waitingCount: Int { waiters.count }
  /// How many routed tasks are remembered for open windows.
  var routedRecordCount: Int { routed.count }
  /// Whether tasks were released and wait to be taken.
  var hasReleased: Bool { !released.isEmpty }

  /// The job tracks a task with dependencies for the first time: from now on its tasks are
  /// indexed. `unrouted` are the tasks it tracks already, not routed yet.
  mutating func activate(unrouted tasks: some Sequence<(key: ObjectIdentifier, node: Node)>) {
    guard !isActive else { return }
    isActive = true
    for (key, node) in tasks {
      tracked(node, as: key)
    }
  }

  /// The job tracked the operation `key` as `node`. A second node for one operation (a duplicate
  /// the job is about to drop) does not replace the first.
  mutating func tracked(_ node: Node, as key: ObjectIdentifier) {
    guard isActive, unrouted[key] == nil else { return }
    unrouted[key] = node
  }

  /// The job dropped `node` without routing it (a duplicate, a replaced retry attempt).
  mutating func forgot(_ node: Node, as key: ObjectIdentifier) {
    guard isActive else { return }
    if unrouted[key] === node {
      unrouted[key] = nil
    }
    dropWaiter(node)
  }

  /// A task tracked with dependencies is about to read whether they finished: from now until
  /// its ``wait(_:for:payload:window:)`` or ``closeWindow(_:)``, the tasks routed are
  /// remembered. Returns the window, to hand to either.
  mutating func openWindow() -> UInt64 {
    openWindows[routings, default: 0] += 1
    return routings
  }

  /// The window opened by ``openWindow()`` closes without a wait (the task waits for nothing).
  mutating func closeWindow(_ window: UInt64) {
    guard let count = openWindows[window] else { return }
    openWindows[window] = count > 1 ? count - 1 : nil
    if openWindows.isEmpty {
      routed.removeAll()
      pruneAt = 64
    }
  }

  /// `node` (tracked with dependencies, its finish observed) waits for `dependencies` now, and
  /// its `window` closes. Returns its release if none is left to wait for (each was routed, or
  /// had finished before).
  mutating func wait(_ node: Node, for dependencies: [Named], payload: Payload, window: UInt64) -> Release? {
    defer { closeWindow(window) }
    var pending: [ObjectIdentifier] = []
    for dependency in dependencies where !pending.contains(dependency.key) {
      if unrouted[dependency.key] == nil {
        // The caller holds `dependency.object`: reading the record releases nothing of its own.
        if dependency.finishedBefore || routed[dependency.key]?.object === dependency.object { continue }
      }
      pending.append(dependency.key)
    }
    guard !pending.isEmpty else { return Release(node: node, payload: payload, reason: .ready) }
    let id = ObjectIdentifier(node)
    for key in pending {
      dependants[key, default: []].append(id)
    }
    waiters[id] = Waiter(node: node, payload: payload, pending: pending)
    return nil
  }

  /// The job routed the operation `key`, `object`, tracked as `node`: the tasks that waited for
  /// it last are released (see ``takeReleased()``). If `node` itself still waited (someone else
  /// ran it), it waits no more.
  mutating func routed(_ node: Node, as key: ObjectIdentifier, object: AnyObject) {
    guard isActive else { return }
    if unrouted[key] === node {
      unrouted[key] = nil
    }
    remember(key, object)
    dropWaiter(node)
    guard let waiting = dependants.removeValue(forKey: key) else { return }
    for id in waiting {
      guard var waiter = waiters[id] else { continue }
      waiter.pending.removeAll { $0 == key }
      if waiter.pending.isEmpty {
        waiters[id] = nil
        released.append(Release(node: waiter.node, payload: waiter.payload, reason: .ready))
      } else {
        waiters[id] = waiter
      }
    }
  }

  /// Nothing can route the dependencies of the waiting tasks any more (the caller decides when):
  /// every waiting task is released, with the dependencies it still waited for.
  mutating func stall() {
    for (_, waiter) in waiters {
      released.append(Release(node: waiter.node, payload: waiter.payload, reason: .stalled(waiter.pending)))
    }
    waiters = [:]
    dependants = [:]
  }

  /// The tasks released since the last call, in the order they were released.
  mutating func takeReleased() -> [Release] {
    guard !released.isEmpty else { return [] }
    defer { released = [] }
    return released
  }

  /// Remembers a routed task while a window is open; prunes, from time to time, the records
  /// older than every open window (no wait can need them). Reads no weak reference.
  private mutating func remember(_ key: ObjectIdentifier, _ object: AnyObject) {
    routings += 1
    guard !openWindows.isEmpty else { return }
    routed[key] = RoutedRecord(object: object, sequence: routings)
    if routed.count >= pruneAt, let oldest = openWindows.keys.min() {
      routed = routed.filter { $0.value.sequence > oldest }
      pruneAt = max(64, routed.count * 2)
    }
  }

  private mutating func dropWaiter(_ node: Node) {
    let id = ObjectIdentifier(node)
    guard let waiter = waiters.removeValue(forKey: id) else { return }
    for key in waiter.pending {
      dependants[key]?.removeAll { $0 == id }
      if dependants[key]?.isEmpty == true {
        dependants[key] = nil
      }
    }
    // Handed out, so that the caller releases the payload (the user's operations) after the lock.
    released.append(Release(node: waiter.node, payload: waiter.payload, reason: .dropped))
  }
}
