import Foundation
import Testing

@testable import JobKit

/// `TaskDependencies` fed events one by one on one thread: which waiting tasks a routing
/// releases, and which a stall gives up on.
@Suite("TaskDependencies state machine")
struct TaskDependenciesStateTests {
  private final class Node {
    let label: String
    init(_ label: String) { self.label = label }
  }

  private typealias Graph = TaskDependencies<Node, String>

  /// An operation stand-in: a node tracked as itself.
  private func named(_ node: Node, finishedBefore: Bool = false) -> Graph.Named {
    Graph.Named(key: ObjectIdentifier(node), object: node, finishedBefore: finishedBefore)
  }

  private func active(tracking nodes: [Node]) -> Graph {
    var graph = Graph()
    graph.activate(unrouted: nodes.map { (ObjectIdentifier($0), $0) })
    return graph
  }

  private func route(_ node: Node, in graph: inout Graph) {
    graph.routed(node, as: ObjectIdentifier(node), object: node)
  }

  /// A wait whose dependencies were read just now: its window opens and closes with it.
  private func wait(
    _ node: Node, for dependencies: [Graph.Named], payload: String, in graph: inout Graph
  ) -> Graph.Release? {
    let window = graph.openWindow()
    return graph.wait(node, for: dependencies, payload: payload, window: window)
  }

  private func labels(_ releases: [Graph.Release]) -> [String] {
    releases.map { "\($0.payload):\($0.reason)" }
  }

  @Test func inactiveUntilActivatedAndThenIndexesTasks() {
    var graph = Graph()
    let early = Node("early")
    graph.tracked(early, as: ObjectIdentifier(early))
    #expect(!graph.isActive)
    graph.activate(unrouted: [(ObjectIdentifier(early), early)])
    #expect(graph.isActive)
    let dependant = Node("dependant")
    #expect(wait(dependant, for: [named(early)], payload: "dependant", in: &graph) == nil)
    #expect(graph.waitingCount == 1)
    route(early, in: &graph)
    #expect(labels(graph.takeReleased()) == ["dependant:ready"])
    #expect(graph.waitingCount == 0)
  }

  @Test func aTaskWaitsForEveryDependencyAndIsReleasedOnce() {
    let first = Node("first")
    let second = Node("second")
    var graph = active(tracking: [first, second])
    #expect(wait(Node("both"), for: [named(first), named(second), named(first)], payload: "both", in: &graph) == nil)
    route(first, in: &graph)
    #expect(graph.takeReleased().isEmpty)
    route(second, in: &graph)
    #expect(labels(graph.takeReleased()) == ["both:ready"])
    route(second, in: &graph)
    #expect(graph.takeReleased().isEmpty)
  }

  @Test func routedOrFinishedDependenciesAreNotWaitedFor() {
    let routed = Node("routed")
    var graph = active(tracking: [routed])
    // The waiting task read that `routed` had not finished; it was routed before the wait.
    let window = graph.openWindow()
    route(routed, in: &graph)
    let finished = Node("finished")
    let release = graph.wait(
      Node("task"), for: [named(routed), named(finished, finishedBefore: true)], payload: "task", window: window)
    #expect(release?.reason == .ready)
    #expect(graph.waitingCount == 0)
  }

  @Test func routedTasksAreRememberedOnlyWhileAWindowIsOpen() {
    var graph = active(tracking: [])
    let before = Node("before")
    route(before, in: &graph)
    #expect(graph.routedRecordCount == 0)
    let window = graph.openWindow()
    let during = Node("during")
    route(during, in: &graph)
    #expect(graph.routedRecordCount == 1)
    graph.closeWindow(window)
    #expect(graph.routedRecordCount == 0)
  }

  @Test func overlappingWindowsKeepOnlyTheRecordsTheOldestOpenOneNeeds() {
    var graph = active(tracking: [])
    var nodes: [Node] = []
    var window = graph.openWindow()
    // Windows always overlap (each opens before the previous closes), as with several producers
    // tracking with dependencies at once: the records stay bounded all the same.
    for round in 0..<2_000 {
      let next = graph.openWindow()
      graph.closeWindow(window)
      window = next
      let node = Node("\(round)")
      nodes.append(node)
      route(node, in: &graph)
      #expect(graph.routedRecordCount <= 128)
    }
    // The open window still sees the task routed since it opened.
    let release = graph.wait(Node("task"), for: [named(nodes.last!)], payload: "task", window: window)
    #expect(release?.reason == .ready)
    #expect(graph.routedRecordCount == 0)
  }

  @Test func aDependencyNotTrackedYetIsWaitedFor() {
    var graph = active(tracking: [])
    let later = Node("later")
    #expect(wait(Node("task"), for: [named(later)], payload: "task", in: &graph) == nil)
    graph.tracked(later, as: ObjectIdentifier(later))
    #expect(graph.takeReleased().isEmpty)
    route(later, in: &graph)
    #expect(labels(graph.takeReleased()) == ["task:ready"])
  }

  @Test func aStallReleasesEveryWaitingTaskWithWhatItStillWaitedFor() {
    let never = Node("never")
    let done = Node("done")
    var graph = active(tracking: [done])
    let cycleA = Node("a")
    let cycleB = Node("b")
    graph.tracked(cycleA, as: ObjectIdentifier(cycleA))
    graph.tracked(cycleB, as: ObjectIdentifier(cycleB))
    _ = wait(cycleA, for: [named(cycleB)], payload: "a", in: &graph)
    _ = wait(cycleB, for: [named(cycleA)], payload: "b", in: &graph)
    _ = wait(Node("orphan"), for: [named(done), named(never)], payload: "orphan", in: &graph)
    route(done, in: &graph)
    #expect(graph.takeReleased().isEmpty)
    #expect(graph.waitingCount == 3)
    graph.stall()
    let released = graph.takeReleased().sorted { $0.payload < $1.payload }
    #expect(
      released.map(\.reason) == [
        .stalled([ObjectIdentifier(cycleB)]), .stalled([ObjectIdentifier(cycleA)]), .stalled([ObjectIdentifier(never)]),
      ])
    #expect(graph.waitingCount == 0)
    // Nothing waits any more: routing the cycle later releases nothing a second time.
    route(cycleA, in: &graph)
    #expect(labels(graph.takeReleased()) == [])
  }

  @Test func aWaitingTaskRoutedItselfIsDroppedAndHandedOut() {
    let dependency = Node("dependency")
    let waiting = Node("waiting")
    var graph = active(tracking: [dependency, waiting])
    _ = wait(waiting, for: [named(dependency)], payload: "waiting", in: &graph)
    route(waiting, in: &graph)
    #expect(labels(graph.takeReleased()) == ["waiting:dropped"])
    route(dependency, in: &graph)
    #expect(graph.takeReleased().isEmpty)
  }

  @Test func aDuplicateNodeDoesNotReplaceTheTrackedOne() {
    let original = Node("original")
    var graph = active(tracking: [original])
    let duplicate = Node("duplicate")
    graph.tracked(duplicate, as: ObjectIdentifier(original))
    graph.forgot(duplicate, as: ObjectIdentifier(original))
    // Still tracked (not routed): a task naming it waits.
    #expect(wait(Node("task"), for: [named(original)], payload: "task", in: &graph) == nil)
  }

  @Test func aFreedObjectAtARoutedAddressIsNotTakenForIt() {
    var graph = active(tracking: [])
    let window = graph.openWindow()
    var key: ObjectIdentifier?
    do {
      let gone = Node("gone")
      key = ObjectIdentifier(gone)
      graph.routed(gone, as: ObjectIdentifier(gone), object: gone)
    }
    // A new object named with the freed one's key: the weak record no longer matches it.
    let other = Node("other")
    let release = graph.wait(
      Node("task"), for: [Graph.Named(key: key!, object: other, finishedBefore: false)], payload: "task",
      window: window)
    #expect(release == nil)
  }

  // MARK: JobState's hooks

  /// A job whose state the tests drive directly (never started).
  private let job = JobController()

  /// Begins `main()` and tracks `dependency`, then `dependant` to wait for it (both for `queue`):
  /// their nodes, and `dependency` named as a dependency. `nil` (recorded) if either was not tracked.
  private func trackDependant(
    _ dependant: Operation, of dependency: Operation, in state: inout JobState, queue: OperationQueue
  ) -> (first: TaskNode, second: TaskNode, named: [TaskDependencies<TaskNode, DependencyWait>.Named])? {
    _ = state.beginMain(on: 1)
    guard
      case .tracked(let first, _, _, _, _, _) = state.track(
        dependency, node: TaskNode(job: job, task: dependency), queue: queue),
      case .tracked(let second, _, _, _, _, _) = state.track(
        dependant, node: TaskNode(job: job, task: dependant), queue: queue, waitsForDependencies: true)
    else {
      Issue.record("not tracked")
      return nil
    }
    let named = [
      TaskDependencies<TaskNode, DependencyWait>.Named(
        key: ObjectIdentifier(dependency), object: dependency, finishedBefore: false)
    ]
    return (first, second, named)
  }

  @Test func aTaskNodeWithDependenciesIsNotQueuedAndStallsOnlyOnceMainReturned() {
    var state = JobState()
    _ = state.beginMain(on: 1)
    let task = BlockOperation()
    let orphan = BlockOperation()
    let outcome = state.track(
      task, node: TaskNode(job: job, task: task), queue: OperationQueue(), waitsForDependencies: true)
    guard case .tracked(let node, _, let queueNow, let waitsForSlot, _, _) = outcome else {
      Issue.record("not tracked: \(outcome)")
      return
    }
    #expect(!queueNow && !waitsForSlot && state.admission.usesDependencies)
    let named = [
      TaskDependencies<TaskNode, DependencyWait>.Named(
        key: ObjectIdentifier(orphan), object: orphan, finishedBefore: false)
    ]
    let wait = DependencyWait(task: task, dependencies: [orphan], target: .none)
    #expect(state.waitForDependencies(node, named, wait, window: state.openDependencyWindow()) == nil)
    // While main() runs, it may still track the dependency: no stall.
    #expect(!state.isStalled && !state.hasStepDue)
    state.mainReturned()
    #expect(state.isStalled && state.hasStepDue)
    let drain = state.nextDrain(on: 1)
    guard drain?.exits.count == 1, let released = drain?.exits.first?.dependencies,
      case .stalled(let missing) = released.outcome
    else {
      Issue.record("the waiting task is not released as stalled")
      return
    }
    #expect(released.operations.count == 1 && released.operations[0] === orphan)
    #expect(missing == [ObjectIdentifier(orphan)])
    #expect(!state.isStalled)
  }

  @Test func aRoutedDependencyReleasesItsDependantIntoTheNextDrain() {
    var state = JobState()
    let dependency = BlockOperation()
    let dependant = BlockOperation()
    guard let (first, second, named) = trackDependant(dependant, of: dependency, in: &state, queue: OperationQueue())
    else { return }
    #expect(
      state.waitForDependencies(
        second, named, DependencyWait(task: dependant, dependencies: [dependency], target: .none),
        window: state.openDependencyWindow()) == nil)
    state.mainReturned()
    _ = state.recordFinish(first)
    guard let routing = state.nextDrain(on: 1), case .route(let node, _) = routing.item else {
      Issue.record("nothing to route")
      return
    }
    #expect(node === first && routing.exits.isEmpty)
    let next = state.nextDrain(on: 1, routed: first)
    #expect(next?.exits.count == 1 && next?.exits.first?.node === second)
    guard let released = next?.exits.first?.dependencies, case .routed = released.outcome else {
      Issue.record("the dependant is not released as ready")
      return
    }
    #expect(released.operations.count == 1 && released.operations[0] === dependency)
  }

  /// A task the job queues waits in its job's admission for its dependencies (its state says
  /// so, with its queue), and waits no more once they were routed: its exit asks for a slot.
  @Test func aTaskTheJobQueuesWaitsForItsDependenciesInItsState() {
    var state = JobState()
    let queue = OperationQueue()
    let dependency = BlockOperation()
    let dependant = BlockOperation()
    guard let (first, second, named) = trackDependant(dependant, of: dependency, in: &state, queue: queue)
    else { return }
    let wait = DependencyWait(task: dependant, dependencies: [dependency], target: .queue(queue))
    let atOnce = state.waitForDependencies(second, named, wait, window: state.openDependencyWindow())
    #expect(atOnce == nil && state.admission.waitingForDependencies == 1)
    guard case .unfinished(.waitingForDependencies(let target), _) = second.state, target === queue else {
      Issue.record("the waiting task's state does not say so: \(second.state)")
      return
    }
    state.mainReturned()
    _ = state.recordFinish(first)
    _ = state.nextDrain(on: 1)
    let next = state.nextDrain(on: 1, routed: first)
    #expect(next?.exits.count == 1 && next?.exits.first?.destination == .slot)
    #expect(next?.exits.first?.queue === queue && state.admission.waitingForDependencies == 0)
    guard case .unfinished(.none, _) = second.state else {
      Issue.record("the released task still waits: \(second.state)")
      return
    }
  }
}
