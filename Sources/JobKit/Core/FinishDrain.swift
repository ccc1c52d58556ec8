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
/// Each thread keeps its drain state in a small block made on its first finish and freed when the
/// thread exits (a thread-specific pointer says where it is; other threads never see it). A
/// finish with no drain running costs one thread-specific read and two flag writes, and no
/// allocation.
enum FinishDrain {
  private typealias Pending = [(operation: ConcurrentOperation, observers: OperationState.Observers)]

  /// One thread's drain: whether it runs, and the finishes appended to it meanwhile.
  private struct ThreadState {
    var isDraining = false
    var pending = Pending()
  }

  /// Where this thread's `ThreadState` lives; freed by the key's destructor when the thread exits.
  private static let stateKey: pthread_key_t = {
    var key = pthread_key_t()
    let created = pthread_key_create(&key) { raw in
      let pointer: UnsafeMutableRawPointer? = raw
      guard let state = pointer?.assumingMemoryBound(to: ThreadState.self) else { return }
      state.deinitialize(count: 1)
      state.deallocate()
    }
    guard created == 0 else {
      fatalError("JobKit: pthread_key_create failed (out of thread-specific keys)")
    }
    return key
  }()

  /// The calling thread's drain state, made on first use.
  private static func threadState() -> UnsafeMutablePointer<ThreadState> {
    let key = stateKey
    if let existing = pthread_getspecific(key) {
      return existing.assumingMemoryBound(to: ThreadState.self)
    }
    let state = UnsafeMutablePointer<ThreadState>.allocate(capacity: 1)
    state.initialize(to: ThreadState())
    pthread_setspecific(key, state)
    return state
  }

  /// Tells `observers` that `operation` finished: now, or once the drain running on this thread
  /// told the observers it is telling. Called with no lock held.
  static func notify(_ observers: OperationState.Observers, of operation: ConcurrentOperation) {
    if case .none = observers { return }
    // Only this thread touches its state, and never across a call below: no lock is needed.
    let state = threadState()
    if state.pointee.isDraining {
      state.pointee.pending.append((operation, observers))
      return
    }
    state.pointee.isDraining = true
    observers.notifyEach { $0.operationDidFinish(operation) }
    while !state.pointee.pending.isEmpty {
      let batch = state.pointee.pending
      state.pointee.pending = []
      for (finished, observers) in batch {
        observers.notifyEach { $0.operationDidFinish(finished) }
      }
    }
    state.pointee.isDraining = false
  }
}
