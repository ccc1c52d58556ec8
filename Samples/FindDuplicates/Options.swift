/// The command line of `find-duplicates`, parsed by hand (the sample depends on JobKit and
/// Foundation only).
struct Options {
  /// The directory to search, as given on the command line.
  var directory = "."
  /// Files smaller than this many bytes are not compared. `0` also reports empty files, as one
  /// set.
  var minimumSize = 1

  /// What the command line asks for.
  enum Request {
    case run(Options)
    case help
  }

  static let usage = """
    Usage: find-duplicates [--min-size BYTES] [DIR]

    Finds files with identical content under DIR (default: the current directory) and prints
    each set of duplicates, largest waste first. Symbolic links and special files are not
    followed or compared; unreadable files and directories are reported and skipped.

    Options:
      --min-size BYTES  Only compare files of at least BYTES bytes (default: 1, so empty files
                        are ignored; 0 lists the empty files as one set).
      -h, --help        Show this help.
    """

  /// Parses the arguments that follow the program name.
  static func parse(_ arguments: some Sequence<String>) throws(UsageError) -> Request {
    var options = Options()
    var directory: String?
    var arguments = arguments.makeIterator()
    var optionsEnded = false

    while let argument = arguments.next() {
      if optionsEnded || !argument.hasPrefix("-") || argument == "-" {
        if let directory {
          throw UsageError("expected one directory, got '\(directory)' and '\(argument)'")
        }
        directory = argument
        continue
      }
      switch argument {
      case "-h", "--help":
        return .help
      case "--":
        optionsEnded = true
      case "--min-size":
        guard let value = arguments.next() else { throw UsageError("--min-size needs a value") }
        options.minimumSize = try parseByteCount(value)
      case _ where argument.hasPrefix("--min-size="):
        options.minimumSize = try parseByteCount(String(argument.dropFirst("--min-size=".count)))
      default:
        throw UsageError("unknown option '\(argument)'")
      }
    }
    if let directory {
      options.directory = directory
    }
    return .run(options)
  }

  private static func parseByteCount(_ text: String) throws(UsageError) -> Int {
    guard let value = Int(text), value >= 0 else {
      throw UsageError("--min-size needs a whole number of bytes, not '\(text)'")
    }
    return value
  }
}

/// A command line that cannot be run, with the message to show.
struct UsageError: Error, CustomStringConvertible {
  let description: String

  init(_ description: String) {
    self.description = description
  }
}
