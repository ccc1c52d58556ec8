import Foundation
import JobKit

/// Computes the ``MerkleTree`` hash of a directory tree as a JobKit job whose next steps are
/// decided as tasks finish:
///
/// 1. Each directory is listed by a ``ListDirectory`` task (at most four at once); its finish
///    tracks a leaf task per regular file and a listing per subdirectory.
/// 2. A leaf task hashes one file: in this process, or on remote workers (see ``LeafHashing``).
/// 3. When a directory's last child (file or subdirectory) is routed, the routing callback
///    combines the directory at once and hands its hash to its parent's directory, so the tree is
///    hashed bottom-up as the leaves come in, never in a pass at the end.
///
/// The first error (an unreadable file or directory, a failed remote task) fails the job with
/// it: a partial tree has no hash. `main()` and the callbacks run one at a time (JobKit routes
/// serially), so the state below needs no lock.
final class TreeHashJob: JobController, @unchecked Sendable {
  // @unchecked Sendable: the mutable state is only touched by main() and the job's callbacks,
  // which JobKit runs one at a time; the results are read after the job finished.

  /// A directory of the tree while its children are hashed.
  private struct Directory {
    /// Relative to the root; empty for the root.
    var path: String
    var name: String
    var parent: Int?
    /// Children hashed so far.
    var children: [(entry: DirectoryEntry, hash: String)] = []
    /// Children listed but not hashed yet; meaningful once listed.
    var pending = 0
  }

  /// The absolute path of the tree's root.
  let root: String
  private let leaves: any LeafHashing
  private let onFileHashed: (@Sendable (_ filesHashed: Int) -> Void)?

  private var directories: [Directory] = []
  private var filesHashed = 0

  /// The root's hash, once the job finished without error.
  private(set) var rootHash: String?
  /// Each directory's hash by its path relative to the root (`.` for the root), once hashed.
  private(set) var directoryHashes: [String: String] = [:]

  /// A job that hashes the tree at `root` (an absolute path), its files by `leaves`; `onFileHashed`,
  /// if given, is called from the job's callbacks with the number of files hashed so far.
  init(root: String, leaves: any LeafHashing, onFileHashed: (@Sendable (_ filesHashed: Int) -> Void)? = nil) {
    self.root = root
    self.leaves = leaves
    self.onFileHashed = onFileHashed
    super.init()
  }

  override func main() {
    setMaxConcurrentTasks(4, forGroup: ListDirectory.self)
    leaves.prepare(self)
    directories.append(Directory(path: "", name: "", parent: nil))
    list(0)
  }

  private func absolutePath(_ relativePath: String) -> String {
    relativePath.isEmpty ? root : root + "/" + relativePath
  }

  private func list(_ index: Int) {
    let path = absolutePath(directories[index].path)
    let listing = ListDirectory { try DirectoryEntry.list(atPath: path) }
    trackAndQueue(resultOf: listing) { [self] result in
      switch result {
      case .success(let entries): listed(index, entries)
      case .failure(let error): fail(error)
      }
    }
  }

  private func listed(_ index: Int, _ entries: [DirectoryEntry]) {
    directories[index].pending = entries.count
    if entries.isEmpty {
      combine(index)
      return
    }
    let directoryPath = directories[index].path
    for entry in entries {
      let path = directoryPath.isEmpty ? entry.name : directoryPath + "/" + entry.name
      switch entry.kind {
      case .file:
        leaves.trackHash(ofFile: path, in: self) { [self] result in
          switch result {
          case .success(let hash):
            filesHashed += 1
            onFileHashed?(filesHashed)
            childHashed(entry, hash, in: index)
          case .failure(let error as TreeHashError):
            fail(error)
          case .failure(let error):
            fail(TreeHashError(path: path, message: "\(error)"))
          }
        }
      case .directory:
        directories.append(Directory(path: path, name: entry.name, parent: index))
        list(directories.count - 1)
      }
    }
  }

  private func childHashed(_ entry: DirectoryEntry, _ hash: String, in index: Int) {
    directories[index].children.append((entry, hash))
    directories[index].pending -= 1
    if directories[index].pending == 0 {
      combine(index)
    }
  }

  /// The directory's last child is done: its hash goes to its parent (or is the tree's).
  private func combine(_ index: Int) {
    let directory = directories[index]
    let hash = MerkleTree.directoryHash(directory.children)
    directories[index].children = []
    directoryHashes[directory.path.isEmpty ? "." : directory.path] = hash
    if let parent = directory.parent {
      childHashed(DirectoryEntry(name: directory.name, kind: .directory), hash, in: parent)
    } else {
      rootHash = hash
    }
  }
}

/// Lists one directory: a group of its own, so that listings have their own limit.
final class ListDirectory: Work<[DirectoryEntry]>, @unchecked Sendable {}

/// How a ``TreeHashJob`` gets the hash of one file.
protocol LeafHashing: Sendable {
  /// Sets the job's limits for the leaf tasks; called once from the job's `main()`.
  func prepare(_ job: JobController)

  /// Tracks in `job` a task that hashes the file at `relativePath` (relative to the job's root)
  /// and hands the result to `completion`, a routing callback of the job. Called from the job's
  /// `main()` or callbacks.
  func trackHash(
    ofFile relativePath: String, in job: TreeHashJob,
    completion: @escaping @Sendable (Result<String, any Error>) -> Void)
}

/// Hashes each file in a task of this process, at most one per core at once.
struct LocalLeafHashing: LeafHashing {
  func prepare(_ job: JobController) {
    job.setMaxConcurrentTasks(max(1, ProcessInfo.processInfo.activeProcessorCount), forGroup: HashFile.self)
  }

  func trackHash(
    ofFile relativePath: String, in job: TreeHashJob,
    completion: @escaping @Sendable (Result<String, any Error>) -> Void
  ) {
    let path = job.root + "/" + relativePath
    job.trackAndQueue(resultOf: HashFile { try MerkleTree.fileHash(atPath: path) }) {
      completion($0)
    }
  }
}

/// Hashes one file in this process.
final class HashFile: Work<String>, @unchecked Sendable {}
