import Foundation

/// The tasks of a group that were added but not started yet, oldest first. Taking the oldest is
/// O(1) amortised, so a sequential group of many tasks stays linear, and lets go of the task at
/// once (a finished task is not kept alive by the line it waited in).
struct PendingTasks {
  /// `storage[head...]` holds the waiting tasks; the slots before `head` are empty.
  private var storage: [Operation?] = []
  private var head = 0

  var isEmpty: Bool { head == storage.count }

  var count: Int { storage.count - head }

  mutating func append(_ task: Operation) {
    storage.append(task)
  }

  /// Removes and returns the oldest task, or `nil` when empty.
  mutating func popFirst() -> Operation? {
    guard head < storage.count else { return nil }
    let task = storage[head]
    storage[head] = nil
    head += 1
    if head == storage.count {
      storage.removeAll(keepingCapacity: true)
      head = 0
    } else if head >= 64, head * 2 >= storage.count {
      storage.removeFirst(head)
      head = 0
    }
    return task
  }

  /// Whether `task` waits here.
  func contains(_ task: Operation) -> Bool {
    storage[head...].contains { $0 === task }
  }

  /// Every waiting task, oldest first, left in place (a snapshot, for inspection).
  var all: [Operation] {
    storage[head...].map { $0! }
  }

  /// Removes and returns every task, oldest first.
  mutating func removeAll() -> [Operation] {
    let all = storage[head...].map { $0! }
    storage = []
    head = 0
    return all
  }
}
