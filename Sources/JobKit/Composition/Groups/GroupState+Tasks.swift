import Foundation

extension GroupState {
  /// The tasks a transition hands out: one needs no array (a sequential group's every step).
  enum Tasks: Sequence {
    case none
    case one(Operation)
    case many([Operation])

    init(_ tasks: [Operation]) {
      self = tasks.isEmpty ? .none : .many(tasks)
    }

    var isEmpty: Bool {
      if case .none = self { return true }
      return false
    }

    struct Iterator: IteratorProtocol {
      fileprivate var single: Operation?
      fileprivate var many: IndexingIterator<[Operation]>?

      mutating func next() -> Operation? {
        if let task = single {
          single = nil
          return task
        }
        return many?.next()
      }
    }

    func makeIterator() -> Iterator {
      switch self {
      case .none: Iterator()
      case .one(let task): Iterator(single: task)
      case .many(let tasks): Iterator(many: tasks.makeIterator())
      }
    }
  }
}
