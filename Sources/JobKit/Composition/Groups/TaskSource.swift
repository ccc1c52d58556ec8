import Foundation

/// The tasks a group takes from a sequence as it runs them (``ConcurrentGroup/init(taking:maxRunning:taskQueue:)``,
/// ``SequentialGroup/init(taking:taskQueue:)``): a closure around the sequence's iterator, called
/// only by the group's job callbacks, never under a lock. (The public initializers are inlinable
/// and make the closure in the caller's module, so the iterator's `next()` is specialized for
/// the caller's sequence instead of running as unspecialized generic code.)
///
/// The iterator is dropped once it returned `nil` or the group finished, so the sequence (and
/// whatever it holds) is released then; the tasks it would still have made are never made.
final class TaskSource: @unchecked Sendable {
  // @unchecked Sendable: `nextTask` is used serially, by the job's router, then its finish observer.
  private var nextTask: (() -> Operation?)?
  /// The `maxRunning` the group was created with, checked when it starts.
  let requestedMaxRunning: Int

  init(_ nextTask: @escaping () -> Operation?, maxRunning: Int) {
    self.nextTask = nextTask
    requestedMaxRunning = maxRunning
  }

  /// The sequence's next task, or `nil` once it is exhausted (or was dropped). Calls user code.
  func next() -> Operation? {
    guard let task = nextTask?() else {
      nextTask = nil
      return nil
    }
    return task
  }

  /// Drops the iterator: the job finished and will never ask for another task.
  func drop() {
    nextTask = nil
  }
}

/// A sequence's iterator for a ``TaskSource``, in a box whose `next()` skips the runtime's
/// exclusivity check: a captured `var` would be checked on every pull. Called only by the
/// group's job callbacks, serially (see ``TaskSource``). Usable from the inlinable
/// `init(taking:)` initializers, so it is specialized for the caller's sequence.
@usableFromInline
final class TaskIterator<Iterator: IteratorProtocol>: @unchecked Sendable where Iterator.Element: Operation {
  // @unchecked Sendable: used serially, as `TaskSource` is.
  @usableFromInline var iterator: Iterator

  @inlinable
  init(_ iterator: Iterator) {
    self.iterator = iterator
  }

  @inlinable
  func next() -> Operation? {
    iterator.next()
  }
}
