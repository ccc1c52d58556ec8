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

extension GroupState {
  /// What the caller does after a transition: track and queue `tasks` with the group's context
  /// (or, if `cancelled`, cancel them and start them untracked so they finish without running;
  /// if `jobWaits`, the job is stopping and cannot finish meanwhile, so one that is not ready is
  /// tracked with the job instead, which queues it and waits for it), then, if `inFlight`, end
  /// the in-flight start (which releases its hold on the job), and ask the job to drain if the
  /// transition `releasedHold` (the group's hold for held tasks).
  struct Launch {
    var tasks = Tasks.none
    var cancelled = false
    var jobWaits = false
    var inFlight = false
    var context: JobContext
    var releasedHold = false
    /// Tasks taken from `pending` that the job's suspension had suspended while they waited
    /// (`suspendWaiting()`): once they are tracked, the caller resumes them if the job no longer
    /// is suspended (a resume meanwhile no longer found them waiting, nor tracked yet).
    var suspendedWhileWaiting: [ConcurrentOperation] = []
  }
}
