import Glibc

/// The command line of `find-duplicates`, parsed by hand (the sample depends on JobKit and
/// Foundation only). Arguments are raw bytes, so a directory whose name is not UTF-8 can be
/// given.
public struct Options: Sendable, Equatable {
  /// How the duplicate sets are written to standard output.
  public enum OutputFormat: Sendable, Equatable {
    /// One path per line (escaped, see ``PathEscaping``), a blank line after each set, then a
    /// summary.
    case text
    /// Each path followed by a NUL, an extra NUL after each set (as `jdupes -0`); nothing else.
    case nulSeparated
    /// One JSON document.
    case json
  }

  /// The directories (or files) to search, as given; default `.`.
  public var roots: [[UInt8]] = []
  /// Files smaller than this many bytes are not compared. `0` also reports empty files.
  public var minimumSize: Int64 = 1
  /// Follow symbolic links to files and directories.
  public var followSymlinks = false
  /// List every hard link of a file in its set, and count hard links to one file as duplicates
  /// of each other (as `jdupes -H` and `fdupes -H`). Without it, each file appears once, under
  /// the path that sorts first byte by byte. Hard links are different names; one name reached
  /// through several paths (`X` and `./X`) is listed once (see the job's `NameIdentity`).
  public var listHardLinks = false
  /// How the sets are written.
  public var format = OutputFormat.text
  /// No progress line.
  public var quiet = false
  /// Where to write the job's timeline (`JobTimeline`): a trace-event JSON file if it ends in
  /// `.json`, else an HTML page. `nil`: no timeline is recorded.
  public var timelinePath: String?

  /// What the command line asks for.
  public enum Request: Sendable, Equatable {
    case run(Options)
    case help
  }

  /// An empty set of options.
  public init() {}

  /// The text of `--help`.
  public static let usage = """
    Usage: find-duplicates [OPTIONS] [DIR...]

    Finds files with identical content under each DIR (default: the current directory) and
    prints each set of duplicates, largest waste first. Files are compared byte by byte after a
    hash, so a reported set is always identical. A file is one file (device and inode) however
    many DIRs and paths reach it. A file that changed during the search (its size, times, device
    or inode, checked again after its bytes were compared, differ from when it was listed) is
    left out of the sets. Unreadable and changed files are reported on standard error.

    Options:
      --min-size SIZE     Only compare files of at least SIZE (default 1, so empty files are
                          ignored; 0 lists the empty files as one set). SIZE takes the units
                          k, M, G, T (powers of 1024): 4k, 1.5M, 2GiB.
      -L, --follow-symlinks
                          Follow symbolic links to files and directories (each file and
                          directory is still visited once). Default: links are ignored.
      -H, --hard-links    List every hard link of a file, and treat hard links to one file as
                          duplicates. Default: a file appears once, under the path that sorts
                          first byte by byte (its other links free no space). A hard link is
                          another name: another directory (by device and inode) or another
                          name in it. One name reached twice (X and ./X, /abs/dir/X and dir/X,
                          a directory given twice, a symbolic link to the file with -L) is
                          listed once.
      -0, --print0        Print each path followed by a NUL and end each set with an extra NUL
                          (as jdupes -0); the summary goes to standard error.
      --json              Print one JSON document: sets, skipped items, summary.
      -q, --quiet         No progress line.
      --timeline FILE     Write a picture of the run to FILE: an HTML page with a timeline of
                          every task, or, if FILE ends in .json, a trace for Perfetto or
                          chrome://tracing.
      -h, --help          Show this help.

    Text output escapes file names so that each is one line: \\ as \\\\, newline, tab and
    carriage return as \\n \\t \\r, other control characters and bytes that are not UTF-8 as \\xHH.
    In JSON, "path" is the name (invalid bytes shown as U+FFFD) and "path_base64" its raw bytes
    when the name is not UTF-8.

    Exit status: 0 when the search completed (with or without duplicates), 1 if it failed or
    standard output could not be written (one message; a closed pipe ends quietly), 2 for a bad
    command line, 130 when interrupted (Ctrl-C), 143 on SIGTERM. An interrupted report ends
    after a whole set (text, -0) or is the whole JSON document or nothing.
    """

  /// Parses the arguments that follow the program name.
  public static func parse(_ arguments: [[UInt8]]) throws(UsageError) -> Request {
    var options = Options()
    var index = 0
    var optionsEnded = false
    func value(for name: String) throws(UsageError) -> String {
      index += 1
      guard index < arguments.count else { throw UsageError("\(name) needs a value") }
      return String(decoding: arguments[index], as: UTF8.self)
    }
    while index < arguments.count {
      defer { index += 1 }
      let raw = arguments[index]
      if optionsEnded || raw.first != UInt8(ascii: "-") || raw.count == 1 {
        options.roots.append(raw)
        continue
      }
      let argument = String(decoding: raw, as: UTF8.self)
      switch argument {
      case "-h", "--help":
        return .help
      case "--":
        optionsEnded = true
      case "--min-size":
        options.minimumSize = try size(try value(for: argument))
      case _ where argument.hasPrefix("--min-size="):
        options.minimumSize = try size(String(argument.dropFirst("--min-size=".count)))
      case "-L", "--follow-symlinks":
        options.followSymlinks = true
      case "-H", "--hard-links":
        options.listHardLinks = true
      case "-0", "--print0", "--null":
        options.format = .nulSeparated
      case "--json":
        options.format = .json
      case "-q", "--quiet":
        options.quiet = true
      case "--timeline":
        options.timelinePath = try value(for: argument)
      case _ where argument.hasPrefix("--timeline="):
        options.timelinePath = String(argument.dropFirst("--timeline=".count))
      default:
        throw UsageError("unknown option '\(PathEscaping.escapedForTerminal(raw))'")
      }
    }
    if options.roots.isEmpty {
      options.roots = [Array(".".utf8)]
    }
    return .run(options)
  }

  private static func size(_ text: String) throws(UsageError) -> Int64 {
    guard let value = parseByteCount(text) else {
      throw UsageError("--min-size needs a size such as 100, 4k or 1.5M, not '\(text)'")
    }
    return value
  }
}

extension Options {
  /// Why `root`, a DIR argument, cannot be searched, or `nil` if it can (`stat` follows symbolic
  /// links): `'NAME': No such file or directory` (the system's message, `strerror`, as in every
  /// other message), or `'NAME': not a directory or regular file`. The name is quoted, so that an
  /// empty argument reads `'': No such file or directory`, and escaped as in the text output.
  public static func problem(withRoot root: [UInt8]) -> UsageError? {
    var status = stat()
    let found = (root + [0]).withUnsafeBufferPointer { path in
      path.withMemoryRebound(to: CChar.self) { stat($0.baseAddress!, &status) } == 0
    }
    let name = "'\(PathEscaping.escapedForTerminal(root))'"
    guard found else {
      return UsageError("\(name): \(String(cString: strerror(errno)))")
    }
    let type = status.st_mode & S_IFMT
    guard type == S_IFDIR || type == S_IFREG else {
      return UsageError("\(name): not a directory or regular file")
    }
    return nil
  }
}

/// A command line that cannot be run, with the message to show.
public struct UsageError: Error, Equatable, CustomStringConvertible {
  /// What is wrong with the command line.
  public let description: String

  /// An error with `description`.
  public init(_ description: String) {
    self.description = description
  }
}
