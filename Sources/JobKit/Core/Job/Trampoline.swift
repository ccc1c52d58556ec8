#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Finishes, stops and suspension steps that nest on one thread run one after another instead of
/// inside each other, so a tree of nested jobs of any depth finishes, stops and suspends in
/// constant stack.
///
/// - **Finishes** travel up the tree: a task's `operationDone` tells its job, whose router may
///   finish the job, which tells its parent. The first finish on a thread becomes the thread's
///   finish trampoline; a finish on the same thread meanwhile is appended and its `operationDone`
///   returns. Its state and `isFinished` notifications still change before it returns; each
///   operation's observers are told in registration order, each once, with no lock held.
/// - **Stops** travel down: a stop whose actions come up while the stop trampoline carries out
///   others is recorded in its job's state at once and carried out right after the current ones.
/// - **Suspension steps** travel down too; steps handed in while a step runs are carried out
///   right after it, depth first, as a recursion would.
///
/// Each thread keeps its trampoline state in a small block made on first use and freed when the
/// thread exits. With no trampoline running, a finish or stop costs one thread-specific read and
/// two flag writes, and no allocation.
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
      guard let pointer else { return }
      let state = Trampoline.stored(pointer)
      state.deinitialize(count: 1)
      state.deallocate()
    }
    guard created == 0 else {
      fatalError("JobKit: pthread_key_create failed (out of thread-specific keys)")
    }
    return key
  }()

  /// The `ThreadState` that `pointer`, the key's value, points to.
  private static func stored(_ pointer: UnsafeMutableRawPointer) -> UnsafeMutablePointer<ThreadState> {
    // The key only ever holds a `ThreadState` that `threadState()` allocated and initialized.
    pointer.assumingMemoryBound(to: ThreadState.self)
  }

  /// The calling thread's trampoline state, made on first use. Only this thread touches it, and never
  /// across a call out of this type: no lock is needed.
  private static func threadState() -> UnsafeMutablePointer<ThreadState> {
    let key = stateKey
    if let existing = pthread_getspecific(key) {
      return stored(existing)
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
  /// lock held; only when a job's children are told of a suspension (it allocates).
  static func performSteps(_ steps: [() -> Void]) {
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
