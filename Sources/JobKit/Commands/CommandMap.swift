import Foundation

/// Maps event types to commands: dispatching one event runs every command mapped to its type,
/// in priority order, each only if all of its guards approve.
///
/// ```swift
/// struct ServerResponse: Sendable { let status: Int }
///
/// let map = CommandMap()
/// map.map(ServerResponse.self, priority: 10) { response in StoreResponse(response, in: model) }
/// map.map(ServerResponse.self, guards: [{ $0.status > 500 }]) { _ in Retry(service) }
/// try await map.dispatch(ServerResponse(status: 503)).run()  // StoreResponse, then Retry
/// ```
///
/// A command is any `Operation` (usually a ``ConcurrentOperation`` or a group), created for each
/// dispatch by the closure given to `map`; it gets the event and whatever that closure captured.
/// Related mappings can be loaded and unloaded together as a ``CommandExtension``.
///
/// ### What a dispatch does
/// ``dispatch(_:)`` takes a snapshot of the mappings of the event's exact type, then, on the
/// calling thread, for each mapping in priority order (higher first, equal priorities in the
/// order they were mapped):
/// 1. asks its guards in order, stopping at the first refusal (a refused mapping is skipped and
///    its command is not created);
/// 2. for a `once` mapping, claims it: the first dispatch to claim it removes it from the map and
///    runs it, a racing dispatch that lost skips it;
/// 3. creates its command.
///
/// All guards are asked, and all commands created, before the first command starts (as in Gummi
/// Commander): a guard sees the event and the world as it was at dispatch time, not the effects
/// of the commands before it. The commands then run as one job, a ``CommandDispatch``, which
/// `dispatch` starts and returns; it reports which mappings ran and why the others did not.
///
/// ### Threads
/// Mapping, unmapping, loading, unloading and dispatching are safe from any thread at the same
/// time, also from guards, command factories, commands and job callbacks. A mapping added or
/// removed while a dispatch chooses its commands does not change that dispatch. The map never
/// holds its lock while it calls a guard, a command factory, a block or an extension, and
/// `dispatch` never blocks.
public final class CommandMap: Sendable {
  /// The queue dispatched commands run on: each dispatch's job (a ``CommandDispatch``, which runs
  /// its commands one after another, or together on a concurrent map) adds its commands to this
  /// queue. The job itself takes no slot of it: it is started on the dispatching thread, which
  /// queues the dispatch's first command (all of them on a concurrent map) before
  /// ``dispatch(_:)`` returns.
  ///
  /// A concurrent queue (the default) lets dispatches overlap. A serial queue runs the map's
  /// commands one at a time: the first commands of several dispatches start in dispatch order,
  /// and each later command of a sequential dispatch joins the end of the queue when the one
  /// before it finished, so commands of different dispatches can alternate. On a serial queue a
  /// command must not wait for another command of the same map (for example by dispatching on it
  /// and awaiting that dispatch), which could only start after it.
  public let queue: OperationQueue
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
    self.queue =
      queue
      ?? {
        let queue = OperationQueue()
        queue.name = "JobKit.CommandMap.queue"
        return queue
      }()
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
  ///   - guards: Asked in order on the dispatching thread, each with the event; the first
  ///     refusal skips the mapping and the guards after it are not asked.
  ///   - makeCommand: Called on the dispatching thread, after the guards approved, to create a
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
  /// guards approve runs `block` with the event as one step of its job (a ``BlockTask``, on a
  /// thread of the map's ``queue``).
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

  /// The mappings of exactly `event`'s type, in the order a dispatch would consider them.
  public func mappings<Event>(for event: Event.Type) -> [CommandMapping] {
    state.withLock { $0.mappings(for: ObjectIdentifier(event)) }
  }

  // MARK: - Dispatching

  /// Runs the commands mapped to the exact type of `event`: asks their guards, creates their
  /// commands, and starts the job running them, which it returns.
  ///
  /// Guards and command factories run on the calling thread before `dispatch` returns (see the
  /// type's documentation for the order); the commands run on ``queue``, one
  /// after another in priority order (or together, on a `concurrent` map). The returned job is
  /// already started: await ``JobController/run()`` or ``ConcurrentOperation/waitForFinish()`` to
  /// wait for it. An event nobody mapped returns a job that finishes at once, without an error.
  ///
  /// Never blocks, so it can be called from a command, a guard or a job callback.
  @discardableResult
  public func dispatch<Event: Sendable>(_ event: Event) -> CommandDispatch {
    let key = ObjectIdentifier(type(of: event))
    let snapshot = state.withLock { $0.beginDispatch(of: key) }
    var ran: [CommandMapping] = []
    var commands: [Operation] = []
    var skipped: [CommandDispatch.Skip] = []
    for mapping in snapshot {
      if let refusal = mapping.refusingGuard(for: event) {
        skipped.append(.init(mapping, .guardRefused(index: refusal)))
      } else if mapping.runsOnce && !state.withLock({ $0.claim(mapping) }) {
        skipped.append(.init(mapping, .alreadyUsed))
      } else {
        ran.append(mapping)
        commands.append(mapping.command(for: event))
      }
    }
    state.withLock { $0.endDispatch() }
    let job = CommandDispatch(
      event: event, ran: ran, commands: commands, skipped: skipped, concurrent: isConcurrent, queue: queue)
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
    state.withLock { $0.unload(extensionID) }
  }

  /// Wraps `block` in a command factory.
  static func blockCommand<Event: Sendable>(
    _ block: @escaping @Sendable (Event) -> Void
  ) -> @Sendable (Event) -> Operation {
    { event in BlockTask { block(event) } }
  }
}
