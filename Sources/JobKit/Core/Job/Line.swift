/// A first-in, first-out line: the one queue type of JobKit's state machines (a job's finished
/// tasks waiting to be routed, a task type's tasks waiting for a slot, a group's tasks waiting
/// for their turn).
///
/// Taking the oldest is O(1) amortised. A taken element is moved out of its slot at once, so the
/// line never keeps it alive (a finished task is not held by the line it waited in) and compacting
/// the storage later, which may happen under a lock, releases nothing.
struct Line<Element> {
  /// `storage[head...]` holds the waiting elements, all non-`nil`; the slots before `head` are
  /// empty.
  private var storage: [Element?] = []
  private var head = 0

  var isEmpty: Bool { head == storage.count }

  var count: Int { storage.count - head }

  mutating func append(_ element: Element) {
    storage.append(element)
  }

  /// Removes and returns the oldest element, or `nil` when the line is empty.
  mutating func popFirst() -> Element? {
    guard head < storage.count else { return nil }
    let element = storage[head].take()
    head += 1
    compact()
    return element
  }

  /// Every waiting element, oldest first, left in place (a snapshot).
  var all: [Element] {
    storage[head...].map { $0! }
  }

  /// Removes and returns every waiting element, oldest first.
  @discardableResult
  mutating func removeAll() -> [Element] {
    let all = self.all
    storage = []
    head = 0
    return all
  }

  /// Removes the first waiting element that satisfies `predicate`, keeping the others' order.
  /// Linear in the line's length. The caller holds the removed element, so nothing is released.
  mutating func removeFirst(where predicate: (Element) -> Bool) {
    guard let index = storage[head...].firstIndex(where: { predicate($0!) }) else { return }
    storage.remove(at: index)
    compact()
  }

  /// Drops the taken slots once the line is empty and has taken `emptyResetSlots` of them, or
  /// once they are more than half of a long storage. (Not each time the line empties: a job's
  /// finished tasks pass through a line one at a time, and clearing its storage costs more than
  /// the few empty slots it frees.)
  private mutating func compact() {
    if head == storage.count {
      guard head >= Self.emptyResetSlots else { return }
      storage.removeAll(keepingCapacity: true)
      head = 0
    } else if head > 1024, head * 2 > storage.count {
      storage.removeFirst(head)
      head = 0
    }
  }

  /// How many taken slots an empty line keeps before it starts over at the front of its storage.
  static var emptyResetSlots: Int { 64 }
}

extension Line where Element: AnyObject {
  /// Whether `element` itself waits in the line.
  func contains(_ element: Element) -> Bool {
    storage[head...].contains { $0 === element }
  }
}
