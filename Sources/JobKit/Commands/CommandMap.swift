import Foundation

/// Maps event types to commands: dispatching one event runs every command mapped to its type,
/// in priority order, each only if all of its guards approve.
///
/// ```swift
/// let map = CommandMap()
/// map.map(ServerResponse.self, priority: 10) { response in StoreResponse(response, in: model) }
/// map.map(ServerResponse.self, guards: [{ $0.status > 500 }]) { _ in Retry(service) }
/// try await map.dispatch(ServerResponse(status: 503)).run()  // StoreResponse, then Retry
/// ```
///
/// A command is any `Operation` (usually a ``ConcurrentOperation`` or a group), created for each
/// dispatch by the closure given to `map`; it gets the event and whatever that closure captured.
/// Related mappings can be loaded and unloaded together as a ``CommandExtension``. Every member is
/// safe from any thread; the map never holds its lock while it calls your code, and a dispatch
/// works on a snapshot of the mappings. Order and threads in full: <doc:CommandMapRules>.
public final class CommandMap: Sendable {
  /// The queue dispatched commands run on: each dispatch's job (a ``CommandDispatch``, which runs
  /// its commands one after another, or together on a concurrent map) adds its commands to this
  /// queue, or, while it is private (below), starts them on JobKit's own dispatch queue. The job
  /// itself takes no slot of it: it is started on the dispatching thread, which queues the
  /// dispatch's first command (all of them on a concurrent map) before ``dispatch(_:)`` returns.
  ///
  /// A concurrent queue (the default) lets dispatches overlap. A serial queue runs the map's
  /// commands one at a time: the first commands of several dispatches start in dispatch order,
  /// and each later command of a sequential dispatch joins the end of the queue when the one
  /// before it finished, so commands of different dispatches can alternate. On a serial queue a
  /// command must not wait for another command of the same map (for example by dispatching on it
  /// and awaiting that dispatch), which could only start after it.
  ///
  /// Reading it hands the queue out. A queue the map made for itself that nobody has read yet
  /// cannot be suspended, limited or inspected by anyone, so the dispatches hand the
  /// ``ConcurrentOperation`` commands (block mappings' ``BlockTask``s among them) to a worker
  /// thread of JobKit's own dispatch queue for the command's `qualityOfService`
  /// (`JobKit.JobController.taskQueue`, with the class's name appended unless `.default`), as a job
  /// does on a queue it made for itself, instead of through `addOperation`. The queue is handed out
  /// too, for all dispatches and for good, when anyone reads a dispatch's
  /// ``JobController/taskQueue`` (the same queue) or a dispatch adds an operation to it: a plain
  /// `Operation` command, a command that is not ready (dependencies) when its worker thread would
  /// start it, or a cancelled command that a stop starts without running it and that is not ready.
  /// From the moment it is handed out, every command goes through `addOperation`, and so does a
  /// command already handed to a worker thread, which checks the queue once more before it starts
  /// the command (a worker that checked just before the hand-out still starts its command outside
  /// the queue). A command started outside the queue is not in the queue's `operations` or
  /// `operationCount`, `waitUntilAllOperationsAreFinished()` does not wait for it (await the
  /// dispatch instead), `cancelAllOperations()` does not cancel it and a
  /// `maxConcurrentOperationCount` does not count it; inside such a command
  /// `OperationQueue.current` is `nil`. Read this property once before the first dispatch (or pass
  /// a queue to ``init(queue:concurrent:)``) to have every command go through the queue. See
  /// <doc:RoutingAndThreads>, "The task queue".
  public var queue: OperationQueue {
    privateQueue?.expose()
    return queueOfCommands
  }

  /// ``queue``, read by the map itself: it does not hand the queue out.
  let queueOfCommands: OperationQueue
  /// Whether ``queue`` is still the map's own, seen by nobody: `nil` for a queue the map was
  /// given. Shared by every dispatch's job, whose task queue it is. `nonisolated(unsafe)`: set
  /// once in `init`, and its one word is only read and written atomically (a `ManagedBuffer`
  /// cannot be `Sendable`).
  nonisolated(unsafe) let privateQueue: OwnQueueFlag?
  /// `true` if the commands of one dispatch run together, `false` (the default) if they run one
  /// after another in priority order.
  public let isConcurrent: Bool

  private let state = LockedBox(CommandMapState())

  /// Creates an empty map whose dispatches run their commands one after another, in priority
  /// order.
  ///
  /// - Parameter queue: Where dispatched commands run (see ``queue``). By default, a concurrent
  ///   queue the map owns.
  public convenience init(queue: OperationQueue? = nil) {
    self.init(queue: queue, concurrent: false)
  }

  /// Creates an empty map.
  ///
  /// - Parameters:
  ///   - queue: Where dispatched commands run (see ``queue``). By default, a concurrent queue the
  ///     map owns.
  ///   - concurrent: `true` to start all commands of one dispatch together (its job then
  ///     finishes when all finished), `false` to run them one after another in priority order.
  public init(queue: OperationQueue? = nil, concurrent: Bool) {
    (queueOfCommands, privateQueue) = OwnQueueFlag.queue(given: queue, name: "JobKit.CommandMap.queue")
    self.isConcurrent = concurrent
  }

  // MARK: - Mapping

  /// Maps `event` to a command: every later dispatch of an event of exactly this type whose
  /// guards all approve calls `makeCommand` with the event and runs the operation it returns.
  ///
  /// Safe from any thread, also during a dispatch (which does not see the new mapping).
  ///
  /// - Parameters:
  ///   - event: The exact event type (a concrete type; a subclass of it does not match).
  ///   - priority: Higher runs first; equal priorities run in the order they were mapped.
  ///   - once: `true` to remove the mapping after it ran once. A dispatch whose guards refuse
  ///     the mapping keeps it mapped; two racing dispatches never both run it.
  ///   - guards: Asked in order, each with the event, when the mapping's turn comes in a dispatch
  ///     (after the commands of higher priority ran; see the type's documentation); the first
  ///     refusal skips the mapping and the guards after it are not asked.
  ///   - makeCommand: Called right after the guards approved, on the same thread, to create a
  ///     new command for each dispatch. Return an operation that is in no queue and not started.
  /// - Returns: The mapping's handle, for ``unmap(_:)`` and dispatch reports.
  @discardableResult
  public func map<Event: Sendable>(
    _ event: Event.Type,
    priority: Int = 0,
    once: Bool = false,
    guards: [@Sendable (Event) -> Bool] = [],
    to makeCommand: @escaping @Sendable (Event) -> Operation
  ) -> CommandMapping {
    addMapping(event, priority: priority, once: once, guards: guards, owner: nil, makeCommand: makeCommand)
  }

  /// Maps `event` to a block: like ``map(_:priority:once:guards:to:)``, but each dispatch whose
  /// guards approve runs `block` with the event as one step of its job (a ``BlockTask``, on the
  /// map's ``queue``, or, while that is private, on JobKit's own dispatch queue).
  ///
  /// With a trailing closure, Swift tells the two `map` methods apart by the closure's result: a
  /// single expression returning an `Operation` maps a command, one returning nothing maps a
  /// block. Spell out `block:` for a block of several statements:
  ///
  /// ```swift
  /// map.map(Login.self, block: { login in
  ///     model.user = login.user
  ///     analytics.track("login")
  /// })
  /// ```
  @discardableResult
  public func map<Event: Sendable>(
    _ event: Event.Type,
    priority: Int = 0,
    once: Bool = false,
    guards: [@Sendable (Event) -> Bool] = [],
    block: @escaping @Sendable (Event) -> Void
  ) -> CommandMapping {
    addMapping(event, priority: priority, once: once, guards: guards, owner: nil, block: block)
  }

  /// Makes a command mapping (for the map itself, or for an extension when `owner` is set), adds
  /// it and returns it.
  func addMapping<Event: Sendable>(
    _ event: Event.Type,
    priority: Int,
    once: Bool,
    guards: [@Sendable (Event) -> Bool],
    owner: ObjectIdentifier?,
    makeCommand: @escaping @Sendable (Event) -> Operation,
    isBlock: Bool = false
  ) -> CommandMapping {
    let mapping = CommandMapping(
      eventType: event, priority: priority, runsOnce: once, guards: guards, isBlock: isBlock, owner: owner,
      makeCommand: makeCommand)
    add(mapping)
    return mapping
  }

  /// Makes a block mapping (run as a ``BlockTask``), adds it and returns it.
  func addMapping<Event: Sendable>(
    _ event: Event.Type,
    priority: Int,
    once: Bool,
    guards: [@Sendable (Event) -> Bool],
    owner: ObjectIdentifier?,
    block: @escaping @Sendable (Event) -> Void
  ) -> CommandMapping {
    addMapping(
      event, priority: priority, once: once, guards: guards, owner: owner, makeCommand: Self.blockCommand(block),
      isBlock: true)
  }

  /// Removes `mapping`. Safe from any thread; a dispatch that already took its snapshot still
  /// runs it. Removing a mapping that is not mapped (unmapped before, or a `once` mapping that
  /// ran) does nothing.
  public func unmap(_ mapping: CommandMapping) {
    state.withLock { _ = $0.remove(mapping) }
  }

  /// Removes every mapping of every event type (Gummi's `unMapAll`, a dispatcher's
  /// `removeAllObservers`), including those a loaded ``CommandExtension`` made. Safe from any
  /// thread.
  ///
  /// - Extensions stay loaded: ``unload(_:)`` still calls their ``CommandExtension/didUnload()``
  ///   (with no mapping left to remove), and mappings they make later are added as usual.
  /// - A dispatch that already took its snapshot still runs the removed mappings (as after
  ///   ``unmap(_:)``); a `once` mapping it claims still runs at most once. Dispatches that begin
  ///   after `unmapAll()` returned see no mapping.
  /// - The map lets go of the removed mappings, and of what their guards and command factories
  ///   captured, after releasing its lock (or when the last dispatch holding them ends).
  public func unmapAll() {
    let removed = state.withLock { $0.removeAll() }
    // Released here, after the lock: a closure's captures may run user code in their `deinit`.
    withExtendedLifetime(removed) {}
  }

  /// The mappings of exactly `event`'s type, in the order a dispatch would consider them.
  public func mappings<Event>(for event: Event.Type) -> [CommandMapping] {
    state.withLock { $0.mappings(for: ObjectIdentifier(event)) }
  }

  // MARK: - Dispatching

  /// Runs the commands mapped to the exact type of `event`, asking each mapping's guards just
  /// before its command is created, and starts the job running them, which it returns.
  ///
  /// The first mapping's guards and command factory run on the calling thread before `dispatch`
  /// returns; on a sequential map, each later mapping's run on the thread that finished the command
  /// before it (see the type's documentation for the order). The commands run on ``queue`` (or,
  /// while it is private, on JobKit's own dispatch queue), one after another in priority order (or
  /// together, on a `concurrent` map). The returned job is already started: await
  /// ``JobController/run()`` or ``ConcurrentOperation/waitForFinish()`` to wait for it. An event
  /// nobody mapped returns a job that finishes at once, without an error.
  ///
  /// Never blocks, so it can be called from a command, a guard or a job callback.
  @discardableResult
  public func dispatch<Event: Sendable>(_ event: Event) -> CommandDispatch {
    let key = ObjectIdentifier(type(of: event))
    let snapshot = state.withLock { $0.beginDispatch(of: key) }
    let chooser = CommandChooser(event: event, snapshot: snapshot, mapState: state)
    let job = CommandDispatch(
      chooser: chooser, concurrent: isConcurrent, queue: queueOfCommands, sharing: privateQueue)
    job.launch()
    return job
  }

  // MARK: - Internal

  /// Adds `mapping`. Returns `false` when its extension is not loaded (nothing is added).
  @discardableResult
  func add(_ mapping: CommandMapping) -> Bool {
    state.withLock { $0.add(mapping) }
  }

  func markLoaded(_ commandExtension: any CommandExtension) -> Bool {
    state.withLock { $0.load(commandExtension) }
  }

  func markUnloaded(_ extensionID: ObjectIdentifier) -> Bool {
    let unloaded = state.withLock { $0.unload(extensionID) }
    return unloaded != nil  // and released after the lock: the extension's mappings are the user's
  }

  /// Wraps `block` in a command factory.
  static func blockCommand<Event: Sendable>(
    _ block: @escaping @Sendable (Event) -> Void
  ) -> @Sendable (Event) -> Operation {
    { event in BlockTask { block(event) } }
  }
}
