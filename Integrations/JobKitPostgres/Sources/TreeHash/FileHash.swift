import Foundation
import JobKit
import JobKitPostgres

/// The remote task kind of `tree-hash`'s leaves: the SHA-256 of one regular file, as 64 lowercase
/// hex digits.
///
/// The input names the file by the tree's root, an absolute path, and the file's path relative to
/// it: **a worker opens `root/path` on its own filesystem**, so every worker must see the tree at
/// the same absolute path as the job (one machine, or a shared mount at the same place). A worker
/// refuses a relative root and a path that leaves the root (`..`, a leading `/`).
enum FileHash: RemoteTaskKind {
  /// One file of a tree.
  struct Input: Codable, Sendable, Equatable {
    /// The tree's root, an absolute path with symbolic links resolved.
    var root: String
    /// The file's path relative to `root`, `/`-separated.
    var path: String
  }

  /// The file's SHA-256 in hex.
  typealias Output = String

  static let name = "tree-hash.file-sha256"

  /// The worker's handler: the file's hash, or why it cannot be read.
  static func hash(_ input: Input) throws(TreeHashError) -> String {
    let components = input.path.split(separator: "/", omittingEmptySubsequences: false)
    guard input.root.hasPrefix("/"), !input.path.isEmpty,
      !components.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty })
    else {
      throw TreeHashError(path: input.path, message: "not a path inside the tree \(input.root)")
    }
    return try MerkleTree.fileHash(atPath: input.root + "/" + input.path)
  }
}

/// Hashes each file as a ``FileHash`` remote task on the queue's workers. The idempotency key
/// names the work, not only the file: the run's id, the file's absolute path, and its size and
/// modification time. A job run again with the same id attaches to the rows of the files already
/// hashed instead of hashing them again, and a file changed since gets a new key, so it is
/// hashed anew instead of answered with its old content's hash.
struct RemoteLeafHashing: LeafHashing {
  let queue: RemoteQueue
  /// The prefix of the tasks' keys.
  let runID: String
  /// The most remote tasks the job keeps queued or running at once.
  let maxQueued: Int

  func prepare(_ job: JobController) {
    job.setMaxConcurrentTasks(maxQueued, forGroup: RemoteWork<FileHash>.self)
  }

  func trackHash(
    ofFile relativePath: String, in job: TreeHashJob,
    completion: @escaping @Sendable (Result<String, any Error>) -> Void
  ) {
    let path = job.root + "/" + relativePath
    let work = RemoteWork<FileHash>(
      FileHash.Input(root: job.root, path: relativePath), queue: queue,
      idempotencyKey: "\(runID):\(path)@\(Self.contentIdentity(ofFile: path))")
    job.trackAndQueue(resultOf: work) { completion($0) }
  }

  /// What tells one content of the file at `path` from the next: its size and modification
  /// time (`size:seconds.nanoseconds`), or `unreadable` (the worker's hash then says why).
  static func contentIdentity(ofFile path: String) -> String {
    guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
      let size = attributes[.size] as? NSNumber, let modified = attributes[.modificationDate] as? Date
    else { return "unreadable" }
    let nanoseconds = Int64((modified.timeIntervalSince1970 * 1e9).rounded())
    return "\(size.int64Value):\(nanoseconds)"
  }
}
