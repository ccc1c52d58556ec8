// pipeline [FILE]
//
// Reads a text file, counts its words and prints the ten most frequent ones, as a
// BlockSequence-style chain: each step gets the previous step's result, the first error skips the
// remaining steps and `finally`, and goes to the one error handler instead.
//
// Without FILE it reads README.md in the current directory (run it from the package root:
// `swift run pipeline`). A missing file shows the error path: a message on standard error and
// exit code 1.

import Foundation
import JobKit

/// Why no report could be made.
enum SampleError: Error, CustomStringConvertible {
  case fileNotFound(path: String, isDefault: Bool)
  case unreadable(path: String, reason: String)

  var description: String {
    switch self {
    case .fileNotFound(let path, isDefault: true):
      let directory = FileManager.default.currentDirectoryPath
      return "\(path) not found in \(directory); run from the package root or pass a file: swift run pipeline FILE"
    case .fileNotFound(let path, isDefault: false):
      return "\(path): no such file"
    case .unreadable(let path, let reason):
      return "\(path): cannot read it as UTF-8 text (\(reason))"
    }
  }
}

/// One line of the report.
struct WordCount: Sendable {
  let word: String
  let count: Int
}

/// Writes `line` and a newline to standard error.
func printError(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Counts the words of `text` case-insensitively; a word is a run of letters and digits.
func countWords(in text: String) -> [String: Int] {
  var counts: [String: Int] = [:]
  var word = ""
  for character in text.lowercased() {
    if character.isLetter || character.isNumber {
      word.append(character)
    } else if !word.isEmpty {
      counts[word, default: 0] += 1
      word = ""
    }
  }
  if !word.isEmpty {
    counts[word, default: 0] += 1
  }
  return counts
}

/// The `limit` most frequent words, most frequent first; ties in alphabetical order.
func mostFrequent(_ counts: [String: Int], limit: Int) -> [WordCount] {
  counts
    .map { WordCount(word: $0.key, count: $0.value) }
    .sorted { $0.count != $1.count ? $0.count > $1.count : $0.word < $1.word }
    .prefix(limit)
    .map { $0 }
}

let arguments = CommandLine.arguments.dropFirst()
let path = arguments.first ?? "README.md"
let isDefaultPath = arguments.isEmpty

let pipeline = Pipeline.start { () throws -> String in
  print("[1/3] reading \(path)")
  guard FileManager.default.fileExists(atPath: path) else {
    throw SampleError.fileNotFound(path: path, isDefault: isDefaultPath)
  }
  let text: String
  do {
    text = try String(contentsOfFile: path, encoding: .utf8)
  } catch {
    throw SampleError.unreadable(path: path, reason: "\(error.localizedDescription)")
  }
  print("      \(text.utf8.count) bytes")
  return text
}
.then { text -> [String: Int] in
  print("[2/3] counting words")
  let counts = countWords(in: text)
  print("      \(counts.values.reduce(0, +)) words, \(counts.count) different")
  return counts
}
.then { counts -> [WordCount] in
  print("[3/3] ranking the top 10")
  return mostFrequent(counts, limit: 10)
}
.onError { error in
  // Runs once, in the pipeline's task, instead of `finally` and the steps after the failing one.
  printError("pipeline: \(error)")
}

// `finally` starts the pipeline; its handler runs once, with the last step's result, in the
// pipeline's task (not on the main queue, which this program does not service).
pipeline.finally { top in
  let width = top.map(\.word.count).max() ?? 0
  print("Top \(top.count) words in \(path):")
  for (rank, entry) in top.enumerated() {
    let word = entry.word.padding(toLength: width, withPad: " ", startingAt: 0)
    print(String(format: "%3d. ", rank + 1) + "\(word)  \(entry.count)")
  }
}

// Keep the process alive until the pipeline finished (after its handler returned).
try? await pipeline.waitForFinish()
exit(pipeline.error == nil ? EXIT_SUCCESS : EXIT_FAILURE)
