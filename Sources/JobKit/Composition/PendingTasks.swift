import Foundation

/// The tasks of a group that were added but not started yet, oldest first. Taking the oldest is
/// O(1) amortised, so a sequential group of many tasks stays linear.
struct PendingTasks {
  private var storage: [Operation] = []
  private var head = 0

  var isEmpty: Bool { head == storage.count }

  mutating func append(_ task: Operation) {
    storage.append(task)
  }

  /// Removes and returns the oldest task, or `nil` when empty.
  mutating func popFirst() -> Operation? {
    guard head < storage.count else { return nil }
    let task = storage[head]
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

  /// Removes `task` wherever it is (a task that finished before its turn). O(n), and rare.
  mutating func remove(_ task: Operation) {
    guard let index = storage[head...].firstIndex(where: { $0 === task }) else { return }
    storage.remove(at: index)
  }

  /// Removes and returns every task, oldest first.
  mutating func removeAll() -> [Operation] {
    // With nothing taken yet (a concurrent group's start), hand the storage over without a copy.
    let all = head == 0 ? storage : Array(storage[head...])
    storage = []
    head = 0
    return all
  }
}
