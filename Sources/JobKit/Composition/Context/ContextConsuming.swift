import Foundation

/// A task that wants the ``JobContext`` of the group it runs in.
///
/// Adopt it in your own `Operation` subclass with a stored property:
///
/// ```swift
/// final class SaveUser: ConcurrentOperation, ContextConsuming, @unchecked Sendable {
///     // @unchecked Sendable: `context` is set by the group before the task is queued.
///     var context: JobContext?
///     override func operationStart() {
///         context?[.savedUser] = "ada"
///         operationDone()
///     }
/// }
/// ```
///
/// A ``SequentialGroup`` or ``ConcurrentGroup`` sets ``context`` to its own context once per task,
/// right before it adds the task to its queue, replacing any earlier value. That happens before
/// the task starts, so a plain stored property is enough as long as nothing else writes it while
/// the task runs. A task that is never started by a group keeps the context it had (``BlockTask``
/// makes a fresh one when it starts without).
public protocol ContextConsuming: AnyObject {
  /// The context of the group running this task; set by the group before the task starts.
  var context: JobContext? { get set }
}

/// A group that shares its context with the groups nested in it: a parent group calls
/// ``adoptContext(_:)`` on a nested group before starting it, so both use the parent's instance.
protocol ContextSharing: AnyObject {
  /// Makes `context` this group's context. Values in the group's previous context whose keys
  /// `context` lacks are copied into `context` first, so nothing set on the nested group is lost.
  func adoptContext(_ context: JobContext)
}

extension JobContext {
  /// Hands this context to `task` if it takes one: a nested group adopts it, a
  /// ``ContextConsuming`` task gets it in ``ContextConsuming/context``.
  ///
  /// The common cases are checked first with class casts, which cost a fraction of a protocol
  /// conformance lookup (`as? any P` searches the conformance tables).
  func inject(into task: Operation) {
    if let block = task as? BlockTask {
      block.context = self
    } else if let group = task as? GroupJob {
      group.adoptContext(self)
    } else if let group = task as? any ContextSharing {
      group.adoptContext(self)
    } else if let consumer = task as? any ContextConsuming {
      consumer.context = self
    }
  }
}
