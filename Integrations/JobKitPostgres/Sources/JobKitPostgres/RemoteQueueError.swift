/// A queue that cannot be used as asked (schema too new, an invalid key or setting, a row gone),
/// or a database that cannot be reached or refuses the connection. The message never holds the
/// connection's password.
///
/// Match on ``code``; two errors are equal when their codes are equal, whatever their
/// ``message``:
///
/// ```swift
/// catch let error as RemoteQueueError where error.code == .schemaTooNew { … }
/// ```
public struct RemoteQueueError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong. Compare codes with `==`, or match the static members.
  public struct Code: Hashable, Sendable, CustomStringConvertible {
    /// The code's name; codes are equal when their names are.
    private let name: String

    init(name: String) {
      self.name = name
    }

    /// The database could not be reached, went away or did not answer in time, for longer than
    /// ``RemoteQueue/Configuration/reconnectTimeout`` (or a statement's time limit): transient,
    /// retried until then.
    public static let databaseUnreachable = Code(name: "databaseUnreachable")
    /// The server refused the user name or password (SQLSTATE 28000, 28P01). Not transient:
    /// reported at once. The message names the user, never the password.
    public static let authenticationFailed = Code(name: "authenticationFailed")
    /// The database named in the settings does not exist on the server (SQLSTATE 3D000). Not
    /// transient: reported at once.
    public static let databaseNotFound = Code(name: "databaseNotFound")
    /// The database's schema is newer than this library's: upgrade the library.
    public static let schemaTooNew = Code(name: "schemaTooNew")
    /// An idempotency key (or queue or kind name) the table cannot store: empty, with a NUL
    /// character, or longer than ``RemoteQueue/maxKeyBytes`` bytes of UTF-8.
    public static let invalidKey = Code(name: "invalidKey")
    /// A ``RemoteWorker/Configuration`` value out of range (a batch or a concurrency below 1, a
    /// lease, heartbeat, poll or prune interval that is not positive, a negative grace period),
    /// or a ``RemoteQueue/Retention`` out of range (a period that is not positive, a batch
    /// below 1): ``RemoteWorker/run()`` throws it before it claims anything, and
    /// ``RemoteQueue/prune()`` before it deletes anything.
    public static let invalidConfiguration = Code(name: "invalidConfiguration")
    /// A task's row was deleted while its task waited for it (or while attaching to it).
    public static let taskVanished = Code(name: "taskVanished")
    /// ``RemoteWorker/run()`` was called a second time: a worker runs once.
    public static let workerAlreadyRan = Code(name: "workerAlreadyRan")

    /// The code's name, for example `schemaTooNew`.
    public var description: String { name }
  }

  /// What went wrong.
  public let code: Code
  /// What is wrong, in words for a person.
  public let message: String

  /// This failure is worth another try now (a lost connection, a statement past its time
  /// limit), as opposed to the final ``Code/databaseUnreachable`` after the reconnect timeout.
  let isTransient: Bool

  /// An error with `code` and `message`.
  public init(_ code: Code, message: String) {
    self.init(code, message: message, transient: false)
  }

  init(_ code: Code, message: String, transient: Bool) {
    self.code = code
    self.message = message
    self.isTransient = transient
  }

  /// Whether the database could not be reached or did not answer
  /// (``Code/databaseUnreachable``), as opposed to a queue used wrongly or a schema too new.
  public var isUnreachable: Bool { code == .databaseUnreachable }

  /// Two errors are equal when their codes are equal; the messages are not compared.
  public static func == (lhs: RemoteQueueError, rhs: RemoteQueueError) -> Bool {
    lhs.code == rhs.code
  }

  /// Hashes the code only, consistent with `==`.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
  }

  /// The code and message, for logs.
  public var description: String { "remote queue: \(code): \(message)" }
}
