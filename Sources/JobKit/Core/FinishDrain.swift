#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Tells a finished operation's observers without nesting finishes on the thread's stack.
///
/// A finish travels up a tree of nested jobs: a task's ``ConcurrentOperation/operationDone(error:)``
/// tells its job, whose router may run the job's last callbacks and finish the job, whose
/// `operationDone` tells the parent job, whose router finishes the parent, and so on. Told
/// directly, each level would run inside the one below it: a chain of 100,000 nested jobs (or
/// groups) would need 100,000 levels of stack and overflow it.
///
/// So the first finish on a thread to tell observers becomes the thread's *drain*. A finish that
/// happens on the same thread while the drain is telling observers (inside a job's router or
/// callback) is appended to the drain's list and its `operationDone` returns; the drain tells
/// those observers once the current ones returned, then any appended meanwhile, until the list is
/// empty. A chain of any depth finishes in constant stack, on the thread that finished its
/// deepest task, level after level, as before.
///
/// What stays as it was: the operation's state and its `isFinished` notifications change before
/// its `operationDone` returns (dependents, `waitUntilFinished()` and the queue slot are released
/// at once); each operation's observers are told in registration order, each once, with no lock
/// held; a job's own callbacks keep their order, since one router runs them. What changes: an
/// observer of an operation finished inside another finish's observers is told after those
/// return instead of before `operationDone` returns.
///
/// The list lives on the drain's stack; other threads never see it (a thread-specific pointer
/// says where it is). A finish with no drain running costs two thread-specific writes, and no
/// allocation.
enum FinishDrain {
  private typealias Pending = [(operation: ConcurrentOperation, observers: OperationState.Observers)]

  /// Where this thread's drain keeps its list (`nil` when no drain runs on the thread).
  private static let listKey: pthread_key_t = {
    var key = pthread_key_t()
    guard pthread_key_create(&key, nil) == 0 else {
      fatalError("JobKit: pthread_key_create failed (out of thread-specific keys)")
    }
    return key
  }()

  /// Tells `observers` that `operation` finished: now, or once the drain running on this thread
  /// told the observers it is telling. Called with no lock held.
  static func notify(_ observers: OperationState.Observers, of operation: ConcurrentOperation) {
    if case .none = observers { return }
    let key = listKey
    if let list = pthread_getspecific(key) {
      list.assumingMemoryBound(to: Pending.self).pointee.append((operation, observers))
      return
    }
    var pending = Pending()
    withUnsafeMutablePointer(to: &pending) { list in
      pthread_setspecific(key, list)
      observers.notifyEach { $0.operationDidFinish(operation) }
      while !list.pointee.isEmpty {
        let batch = list.pointee
        list.pointee = []
        for (finished, observers) in batch {
          observers.notifyEach { $0.operationDidFinish(finished) }
        }
      }
      pthread_setspecific(key, nil)
    }
  }
}
