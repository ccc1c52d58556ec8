import Foundation

/// Where JobKit reports misuse of its API.
///
/// Every misuse JobKit detects (starting an operation twice, calling `operationDone` twice,
/// tracking a task twice or after the job finished, …) is
/// 1. appended to the ``ConcurrentOperation/misuses`` list of the operation it concerns, and
/// 2. passed to ``misuseHandler``, which by default writes one line to standard error.
///
/// Nothing is ever silently dropped and no misuse crashes the process. Install a handler to route
/// reports to your logger, or to fail a test:
///
/// ```swift
/// JobKitDiagnostics.misuseHandler = { error, operation in
///     logger.warning("\(error) in \(operation)")
/// }
/// ```
public enum JobKitDiagnostics {
  /// A function that receives one misuse report and the operation it concerns.
  public typealias MisuseHandler = @Sendable (_ error: JobKitError, _ operation: Operation) -> Void

  private struct Handlers {
    var global: MisuseHandler
    /// Handlers for one operation each, while it lives (see `setMisuseHandler(_:for:)`).
    var scoped: [ObjectIdentifier: ScopedHandler] = [:]
    /// Entries of freed operations are dropped when the table reaches this size (amortised O(1)).
    var pruneAt = 64
  }

  private struct ScopedHandler {
    weak var operation: Operation?
    let handler: MisuseHandler
  }

  private static let storage = LockedBox(Handlers(global: standardErrorHandler))

  /// The default handler: writes `JobKit misuse: <error> [<operation type>]` to standard error.
  public static let standardErrorHandler: MisuseHandler = { error, operation in
    let line = "JobKit misuse: \(error) [\(type(of: operation))]\n"
    FileHandle.standardError.write(Data(line.utf8))
  }

  /// The handler called for every misuse report (unless the operation has a handler of its own,
  /// see ``setMisuseHandler(_:for:)``), on the thread that detected the misuse, after JobKit
  /// released its locks. Setting it is thread-safe; it applies to reports made after the
  /// assignment.
  public static var misuseHandler: MisuseHandler {
    get { storage.withLock { $0.global } }
    set {
      let replaced = storage.withLock { exchange(&$0.global, with: newValue) }
      _ = replaced  // released after the lock: the user's earlier handler
    }
  }

  /// Sends the misuse reports about `operation` to `handler` instead of ``misuseHandler``, for
  /// as long as `operation` lives (`nil` removes it). For a test that misuses an operation on
  /// purpose: it silences (or checks) that operation's reports and no other test's.
  ///
  /// ```swift
  /// let job = MyJob()
  /// JobKitDiagnostics.setMisuseHandler({ _, _ in }, for: job)  // expected: checked via job.misuses
  /// ```
  public static func setMisuseHandler(_ handler: MisuseHandler?, for operation: Operation) {
    let key = ObjectIdentifier(operation)
    let before = storage.withLock { handlers in
      // Kept until after the lock: the handlers replaced or pruned below are the user's.
      let before = handlers.scoped
      handlers.scoped[key] = handler.map { ScopedHandler(operation: operation, handler: $0) }
      if handlers.scoped.count >= handlers.pruneAt {
        handlers.scoped = handlers.scoped.filter { $0.value.operation != nil }
        handlers.pruneAt = max(64, handlers.scoped.count * 2)
      }
      return before
    }
    _ = before  // released after the lock
  }

  static func report(_ error: JobKitError, for operation: Operation) {
    let handler = storage.withLock { handlers -> MisuseHandler in
      guard let scoped = handlers.scoped[ObjectIdentifier(operation)], scoped.operation === operation else {
        return handlers.global
      }
      return scoped.handler
    }
    handler(error, operation)
  }
}
