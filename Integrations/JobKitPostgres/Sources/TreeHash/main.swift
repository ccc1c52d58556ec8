// tree-hash: the Merkle hash of a directory tree (see MerkleTree.swift for its definition), as a
// JobKit job whose file hashes run in this process or, with --database, as remote tasks on
// worker processes (`tree-hash worker --database URL`). Same output either way.
//
// Exit status: 0 with the hash printed, 1 when the tree could not be hashed (an unreadable file,
// a database that cannot be reached), 2 for a bad command line.

import Foundation
import JobKit

func writeToStandardError(_ text: String) {
  FileHandle.standardError.write(Data(text.utf8))
}

let options: Options
do {
  options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
  guard let message = error.message else {
    print(Options.usage)
    exit(0)
  }
  writeToStandardError("tree-hash: \(message)\nRun 'tree-hash --help' for usage.\n")
  exit(2)
}

/// Prints the tree's hash, or every directory's with `--dirs` (the root first, as `.`).
func printHashes(rootHash: String?, directoryHashes: [String: String]) {
  guard let rootHash else { return }
  guard options.printsDirectories else {
    print(rootHash)
    return
  }
  var lines = "\(rootHash)  .\n"
  let others = directoryHashes.filter { $0.key != "." }
  for (path, hash) in others.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
    lines += "\(hash)  \(path)\n"
  }
  print(lines, terminator: "")
}

/// Reports the files hashed, every 100th, on standard error (`--progress`).
@Sendable func reportProgress(_ filesHashed: Int) {
  if filesHashed % 100 == 0 {
    writeToStandardError("tree-hash: \(filesHashed) files hashed\n")
  }
}
let progress: (@Sendable (Int) -> Void)? = options.reportsProgress ? reportProgress : nil

/// The absolute path of the directory `directory`, symbolic links resolved (workers open the
/// same path); ends the process with status 1 if it is none.
func resolvedDirectory(_ directory: String) -> String {
  guard let resolved = realpath(directory, nil) else {
    writeToStandardError("tree-hash: \(directory): \(String(cString: strerror(errno)))\n")
    exit(1)
  }
  let root = String(cString: resolved)
  free(resolved)
  var status = stat()
  guard stat(root, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
    writeToStandardError("tree-hash: \(directory): not a directory\n")
    exit(1)
  }
  return root
}

switch options.mode {
case .worker:
  exit(await runWorker(options))
case .submit(let directory):
  let root = resolvedDirectory(directory)
  do {
    print(try await submitTree(root: root, options: options))
  } catch {
    writeToStandardError("tree-hash: \(error)\n")
    exit(1)
  }
case .result(let key):
  do {
    let output = try await awaitTree(key: key, options: options)
    printHashes(rootHash: output.rootHash, directoryHashes: output.directoryHashes)
  } catch {
    writeToStandardError("tree-hash: \(error)\n")
    exit(1)
  }
case .hash(let directory):
  let root = resolvedDirectory(directory)
  let job: TreeHashJob
  do {
    if options.databaseURL != nil {
      job = try await hashRemotely(root: root, options: options, progress: progress)
    } else {
      job = TreeHashJob(root: root, leaves: LocalLeafHashing(), onFileHashed: progress)
      try await job.run()
    }
  } catch {
    writeToStandardError("tree-hash: \(error)\n")
    exit(1)
  }
  printHashes(rootHash: job.rootHash, directoryHashes: job.directoryHashes)
}
