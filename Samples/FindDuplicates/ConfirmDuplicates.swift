import Foundation
import JobKit

/// A task that compares, byte by byte, files of one size that have the same content hash, and
/// splits them into sets of truly identical files.
///
/// Each round takes the first remaining file as a reference and streams every other remaining
/// file against it, so at most two files are open at a time however large the bucket. Files
/// equal to the reference make a set; the others go on to the next round (a hash collision is
/// rare, so there is usually one round). A file that cannot be read is skipped.
final class ConfirmDuplicates: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: the results below are written only by `operationStart()` before it
  // calls `operationDone`, and read only once the task finished.

  let size: Int
  let candidates: [String]
  /// The sets of two or more identical files.
  private(set) var duplicateSets: [DuplicateSet] = []
  /// The candidates that could not be read.
  private(set) var unreadableFiles: [SkippedItem] = []

  init(size: Int, candidates: [String]) {
    self.size = size
    self.candidates = candidates
  }

  override func operationStart() {
    var remaining = candidates[...]
    while remaining.count >= 2, !isCancelled {
      let reference = remaining.removeFirst()
      var equal: [String] = []
      var different: [String] = []
      var referenceIsReadable = true
      for (index, path) in zip(remaining.indices, remaining) {
        guard !isCancelled else { break }
        do {
          if try Self.contentsEqual(reference, path) {
            equal.append(path)
          } else {
            different.append(path)
          }
        } catch {
          unreadableFiles.append(SkippedItem(path: error.path, error: error.underlying))
          if error.path == reference {
            // Drop the reference; everything not yet dropped goes to the next round.
            different = equal + different + remaining[index...]
            referenceIsReadable = false
            break
          }
        }
      }
      if referenceIsReadable, !equal.isEmpty {
        duplicateSets.append(DuplicateSet(size: size, paths: [reference] + equal))
      }
      remaining = different[...]
    }
    operationDone()
  }

  /// A file that could not be read during a comparison.
  private struct ComparisonFailure: Error {
    let path: String
    let underlying: any Error
  }

  /// Whether the files at `first` and `second` have the same bytes, read in chunks.
  private static func contentsEqual(_ first: String, _ second: String) throws(ComparisonFailure)
    -> Bool
  {
    let firstReader = try reading(first) { try FileChunkReader(path: first) }
    let secondReader = try reading(second) { try FileChunkReader(path: second) }
    while true {
      let firstChunk = try reading(first) { try firstReader.nextChunk() }
      let secondChunk = try reading(second) { try secondReader.nextChunk() }
      guard firstChunk == secondChunk else { return false }
      if firstChunk == nil { return true }
    }
  }

  /// Runs `body`, attributing any error it throws to the file at `path`.
  private static func reading<T>(_ path: String, _ body: () throws -> T) throws(ComparisonFailure)
    -> T
  {
    do {
      return try body()
    } catch {
      throw ComparisonFailure(path: path, underlying: error)
    }
  }
}
