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

  private static let storage = LockedBox<MisuseHandler>(standardErrorHandler)

  /// The default handler: writes `JobKit misuse: <error> [<operation type>]` to standard error.
  public static let standardErrorHandler: MisuseHandler = { error, operation in
    let line = "JobKit misuse: \(error) [\(type(of: operation))]\n"
    FileHandle.standardError.write(Data(line.utf8))
  }

  /// The handler called for every misuse report, on the thread that detected the misuse, after
  /// JobKit released its locks. Setting it is thread-safe; it applies to reports made after the
  /// assignment.
  public static var misuseHandler: MisuseHandler {
    get { storage.withLock { $0 } }
    set { storage.withLock { $0 = newValue } }
  }

  static func report(_ error: JobKitError, for operation: Operation) {
    misuseHandler(error, operation)
  }
}
