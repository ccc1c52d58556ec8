#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Finishes and stops that nest on one thread run one after another instead of inside each other,
/// so a tree of nested jobs of any depth finishes, and is stopped, in constant stack.
///
/// **Finishes.** A finish travels up a tree of nested jobs: a task's
/// ``ConcurrentOperation/operationDone(error:)`` tells its job, whose router may run the job's last
/// callbacks and finish the job, whose `operationDone` tells the parent job, whose router finishes
/// the parent, and so on. Told directly, each level would run inside the one below it: a chain of
/// 100,000 nested jobs (or groups) would need 100,000 levels of stack and overflow it. So the first
/// finish on a thread to tell observers becomes the thread's finish trampoline. A finish that
/// happens on the same thread while the trampoline tells observers (inside a job's router or
/// callback) is appended to the trampoline's list and its `operationDone` returns; the trampoline
/// tells those observers once the current ones returned, then any appended meanwhile, until the
/// list is empty. The operation's state and its `isFinished` notifications still change before its
/// `operationDone` returns (dependents, `waitUntilFinished()` and the queue slot are released at
/// once); each operation's observers are told in registration order, each once, with no lock held;
/// a job's own callbacks keep their order, since one router runs them.
///
/// **Stops.** A stop travels down the same tree: a job's stop cancels its tasks, each nested job's
/// `cancel()` stops it and cancels its own tasks, and so on. So the first stop on a thread to carry
/// out its actions (cancel tasks, release waiting ones, route) becomes the stop trampoline. A stop
/// whose actions come up while the trampoline carries out others on the same thread (a nested job
/// cancelled by its parent, or a job stopped from a callback that a cancel caused) is recorded in
/// its job's state at once, as always (no callback runs after it), and its actions are carried out
/// right after the current ones, before the outermost stop returns.
///
/// **Suspension steps.** A suspend or resume travels down the tree too: a job tells each child,
/// whose own suspension tells its children, and so on. So the first such steps on a thread become
/// the thread's step trampoline, and steps handed in while a step runs (one level down) are carried
/// out right after that step returned, before the steps handed in earlier (depth first, the order a
/// recursion would take). The outermost call returns once every step was carried out.
///
/// Each thread keeps its trampoline state in a small block made on its first use and freed when the
/// thread exits (a thread-specific pointer says where it is; other threads never see it). A finish
/// or stop with no trampoline running costs one thread-specific read and two flag writes, and no
/// allocation.
enum Trampoline {
  private typealias Finishes = [(
    operation: ConcurrentOperation, observers: OperationState.Observers, error: (any Error)?
  )]

  /// One thread's trampolines: whether each runs, and what was appended to it meanwhile.
  private struct ThreadState {
    var isNotifying = false
    var finishes = Finishes()
    var isStopping = false
    var stops: [(job: JobController, actions: JobState.StopActions)] = []
    var isStepping = false
    /// The steps left to carry out, the next one last.
    var steps: [() -> Void] = []
    /// The steps handed in while the current step runs, in order.
    var handedIn: [() -> Void] = []
  }

  /// Where this thread's `ThreadState` lives; freed by the key's destructor when the thread exits.
  private static let stateKey: pthread_key_t = {
    var key = pthread_key_t()
    let created = pthread_key_create(&key) { raw in
      let pointer: UnsafeMutableRawPointer? = raw
      // The key only ever holds a `ThreadState` this type allocated.
      guard let state = pointer?.assumingMemoryBound(to: ThreadState.self) else { return }
      state.deinitialize(count: 1)
      state.deallocate()
    }
    guard created == 0 else {
      fatalError("JobKit: pthread_key_create failed (out of thread-specific keys)")
    }
    return key
  }()

  /// The calling thread's trampoline state, made on first use. Only this thread touches it, and never
  /// across a call out of this type: no lock is needed.
  private static func threadState() -> UnsafeMutablePointer<ThreadState> {
    let key = stateKey
    if let existing = pthread_getspecific(key) {
      // The key only ever holds a `ThreadState` this type allocated (read on every stop).
      return existing.assumingMemoryBound(to: ThreadState.self)
    }
    let state = UnsafeMutablePointer<ThreadState>.allocate(capacity: 1)
    state.initialize(to: ThreadState())
    pthread_setspecific(key, state)
    return state
  }

  /// Tells `observers` that `operation` finished: now, or once the finish trampoline running on this
  /// thread told the observers it is telling. Called with no lock held.
  static func notify(_ observers: OperationState.Observers, of operation: ConcurrentOperation, error: (any Error)?) {
    if case .none = observers { return }
    let state = threadState()
    if state.pointee.isNotifying {
      state.pointee.finishes.append((operation, observers, error))
      return
    }
    state.pointee.isNotifying = true
    observers.notifyEach { $0.operationDidFinish(operation, error: error) }
    while !state.pointee.finishes.isEmpty {
      let batch = state.pointee.finishes
      state.pointee.finishes = []
      for (finished, observers, error) in batch {
        observers.notifyEach { $0.operationDidFinish(finished, error: error) }
      }
    }
    state.pointee.isNotifying = false
  }

  /// Carries out `actions` of `job`'s stop (`JobController.performNow(_:)`): now, or once the
  /// stop trampoline running on this thread carried out the actions it is carrying out. Called with
  /// no lock held, after the stop was recorded in the job's state.
  static func perform(_ actions: JobState.StopActions, of job: JobController) {
    let state = threadState()
    if state.pointee.isStopping {
      state.pointee.stops.append((job, actions))
      return
    }
    state.pointee.isStopping = true
    job.performNow(actions)
    while !state.pointee.stops.isEmpty {
      let batch = state.pointee.stops
      state.pointee.stops = []
      for (stopped, actions) in batch {
        stopped.performNow(actions)
      }
    }
    state.pointee.isStopping = false
  }

  /// Carries out `steps` in order: now, or, if this thread's step trampoline is carrying out a step,
  /// right after that step returned and before the steps handed in before it. Called with no
  /// lock held; only when a suspension is delivered to a job's children (it allocates).
  static func carryOut(_ steps: [() -> Void]) {
    let state = threadState()
    if state.pointee.isStepping {
      state.pointee.handedIn.append(contentsOf: steps)
      return
    }
    state.pointee.isStepping = true
    state.pointee.steps = steps.reversed()
    while let step = state.pointee.steps.popLast() {
      step()
      if !state.pointee.handedIn.isEmpty {
        state.pointee.steps.append(contentsOf: state.pointee.handedIn.reversed())
        state.pointee.handedIn = []
      }
    }
    state.pointee.isStepping = false
  }
}
