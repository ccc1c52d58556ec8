/// The command line of `tree-hash`.
struct Options: Equatable {
  /// What the process does.
  enum Mode: Equatable {
    /// Hash the tree at the path (as given).
    case hash(directory: String)
    /// Be a worker: file hashes, and whole trees submitted with `submit`.
    case worker
    /// Insert the tree's job at the path (as given) into the queue, print its key, exit.
    case submit(directory: String)
    /// Wait for the submitted job with this key and print its hashes.
    case result(key: String)
  }

  var mode: Mode
  /// `--database URL`: the PostgreSQL server of the remote queue; none runs in process.
  var databaseURL: String?
  /// `--queue NAME`: the remote queue's name.
  var queueName = "tree-hash"
  /// `--run ID`: the prefix of the leaves' idempotency keys (a fresh one if nil).
  var runID: String?
  /// `--id ID`: the worker's id (host and process id if nil).
  var workerID: String?
  /// `--concurrency N`: files a worker hashes at once, or leaves the job keeps queued remotely.
  var concurrency: Int?
  /// `--lease SECONDS`: a worker's lease on the rows it claims (the library's default if nil).
  var leaseSeconds: Int?
  /// `--dirs`: print every directory's hash, not only the root's.
  var printsDirectories = false
  /// `--progress`: report the files hashed on standard error.
  var reportsProgress = false

  static let usage = """
    usage: tree-hash [--dirs] [--progress] DIR
           tree-hash [--dirs] [--progress] --database URL [--queue NAME] [--run ID] [--concurrency N] DIR
           tree-hash worker --database URL [--queue NAME] [--id ID] [--concurrency N] [--lease SECONDS]
           tree-hash submit --database URL [--queue NAME] [--concurrency N] DIR
           tree-hash result --database URL [--queue NAME] [--dirs] KEY

    Prints the Merkle hash of the directory tree DIR: SHA-256 of each regular file; each
    directory the SHA-256 of its entries in byte order of their names, each "f" or "d", a space,
    the entry's hex hash, a space, the name and a NUL byte. Symbolic links are not followed.

      --dirs             print "HASH  PATH" for every directory (PATH relative to DIR, "." for DIR)
      --progress         report the number of files hashed on standard error
      --database URL     run the file hashes as remote tasks on the workers of this PostgreSQL
                         server (postgres://user:password@host:port/database?sslmode=require, or
                         postgres://user@localhost/database?host=/socket/directory)
      --queue NAME       the remote queue (default: tree-hash)
      --run ID           the prefix of the tasks' idempotency keys: run again with the ID of an
                         interrupted run, and the files it already hashed are not hashed again
                         (default: a new ID each run)
      --concurrency N    a worker: files hashed at once (default: one per core); the job: remote
                         tasks queued at once (default: 256)
      --id ID            the worker's id in the queue (default: host name and process id)
      --lease SECONDS    a worker's lease on a claimed file: a dead worker's files are hashed
                         again elsewhere this long after its last heartbeat (default: 30)

    The durable mode: `submit` inserts the whole tree as a job that a worker runs (its leaves
    on the workers too), prints the job's key and exits; `result` waits for that key's job and
    prints what `tree-hash DIR` prints. A worker killed while it runs the job is replaced by
    another worker within a lease: the job runs again and the files it hashed are not hashed
    again.

    A worker opens the paths the job sends it: DIR as an absolute path, and a file's path relative
    to it. Workers must see the same tree at the same absolute path as the job.
    """

  /// Parses the arguments after the program's name.
  static func parse(_ arguments: [String]) throws(UsageError) -> Options {
    var rest = arguments[...]
    let command = rest.first.map { ["worker", "submit", "result"].contains($0) } == true ? rest.popFirst() : nil
    let isWorker = command == "worker"
    var options = Options(mode: .worker)
    var directory: String?
    func value(of option: String) throws(UsageError) -> String {
      guard let value = rest.popFirst() else { throw UsageError("\(option) needs a value") }
      return value
    }
    while let argument = rest.popFirst() {
      switch argument {
      case "--database": options.databaseURL = try value(of: argument)
      case "--queue": options.queueName = try value(of: argument)
      case "--run": options.runID = try value(of: argument)
      case "--id": options.workerID = try value(of: argument)
      case "--concurrency":
        guard let count = Int(try value(of: argument)), count >= 1 else {
          throw UsageError("--concurrency needs a whole number of 1 or more")
        }
        options.concurrency = count
      case "--lease":
        guard let seconds = Int(try value(of: argument)), seconds >= 1 else {
          throw UsageError("--lease needs a whole number of seconds, 1 or more")
        }
        options.leaseSeconds = seconds
      case "--dirs": options.printsDirectories = true
      case "--progress": options.reportsProgress = true
      case "-h", "--help": throw UsageError(nil)
      default:
        guard !argument.hasPrefix("-"), directory == nil else { throw UsageError("unexpected argument \(argument)") }
        directory = argument
      }
    }
    if isWorker {
      guard directory == nil else { throw UsageError("a worker takes no DIR") }
      guard options.databaseURL != nil else { throw UsageError("a worker needs --database URL") }
    } else if let command {
      guard options.databaseURL != nil else { throw UsageError("\(command) needs --database URL") }
      guard let argument = directory else {
        throw UsageError(command == "submit" ? "DIR is missing" : "KEY is missing")
      }
      options.mode = command == "submit" ? .submit(directory: argument) : .result(key: argument)
    } else {
      guard let directory else { throw UsageError("DIR is missing") }
      options.mode = .hash(directory: directory)
    }
    return options
  }
}

/// A command line `tree-hash` cannot run; no message asks for the usage alone.
struct UsageError: Error {
  var message: String?

  init(_ message: String?) {
    self.message = message
  }
}
